import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const verificationPages = new Hono<DashboardEnv>();
