import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const usagePages = new Hono<DashboardEnv>();
