// The tables, one file per area of src/domain that owns them. drizzle-kit reads the schema from this file
// (drizzle.config.ts), so a table in a file not exported here is left out of the migrations.
export * from "./accounts";
export * from "./ai";
export * from "./audit";
export * from "./automations";
export * from "./campaigns";
export * from "./contacts";
export * from "./credits";
export * from "./dns";
export * from "./domains";
export * from "./events";
export * from "./feedback";
export * from "./forms";
export * from "./inbound";
export * from "./members";
export * from "./reports";
export * from "./segments";
export * from "./sending";
export * from "./smtp";
export * from "./suppressions";
export * from "./templates";
export * from "./topics";
export * from "./verification";
export * from "./webhooks";
