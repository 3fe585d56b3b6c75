import type { TestProject } from "vitest/node";
import { startStack, type StackInfo } from "./stack.ts";

declare module "vitest" {
  export interface ProvidedContext {
    e2eStack: StackInfo;
  }
}

// One local stack (`npm run dev`'s script on free ports, its own state directory) for all the end-to-end files,
// instead of one each: starting it is most of an e2e file's time. The files run one at a time and each works with
// names of its own (domains, addresses, keys), so what one leaves in the demo account does not touch another's checks.
export default async function setup(project: TestProject) {
  const { stop, ...info } = await startStack();
  project.provide("e2eStack", info);
  return stop;
}
