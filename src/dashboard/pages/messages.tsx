import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const messagePages = new Hono<DashboardEnv>();
