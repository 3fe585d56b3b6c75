import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const automationPages = new Hono<DashboardEnv>();
