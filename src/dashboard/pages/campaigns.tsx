import { Hono } from "hono";
import type { DashboardEnv } from "../session";

export const campaignPages = new Hono<DashboardEnv>();
