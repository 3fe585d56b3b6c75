import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const domainPages = new Hono<DashboardEnv>();
