import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const contactPages = new Hono<DashboardEnv>();
