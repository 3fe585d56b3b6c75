import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const apiKeyPages = new Hono<DashboardEnv>();
