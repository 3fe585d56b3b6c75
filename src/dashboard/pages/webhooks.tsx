import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const webhookPages = new Hono<DashboardEnv>();
