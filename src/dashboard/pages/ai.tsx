import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const aiPages = new Hono<DashboardEnv>();
