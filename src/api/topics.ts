import { createTopic, deleteTopic, findTopic, listTopics, serializeTopic, updateTopic } from "../domain/topics/topics";
import { topicChangeInput, topicInput } from "../domain/topics/input";
import { notFound } from "../errors";
import { orRefuse } from "../http/refusals";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";

const tags = ["Topics"];

const TopicSchema = z
  .object({
    id: z.string().openapi({ example: "top_4bT9xQ2mLk7vN1cZ8pR3sW" }),
    name: z.string(),
    description: z.string().nullable(),
    default_subscribed: z.boolean().openapi({ description: "Whether a contact who never chose is subscribed" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Topic");

const createRoute = keyedRoute(
  "contacts",
  {
    method: "post",
    path: "/topics",
    tags,
    summary: "Create a subscription topic",
    description: "At most 50 per account; names are unique in the account.",
    request: { body: jsonBody(topicInput) },
    responses: { 201: jsonResponse(TopicSchema, "The topic") },
  },
  { liveKeyOnly: "Creating a topic" },
);

const listRoute = keyedRoute("contacts", {
  method: "get",
  path: "/topics",
  tags,
  summary: "The account's topics, newest first",
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(TopicSchema, "TopicPage"), "A page of topics") },
});

const getRoute = keyedRoute("contacts", {
  method: "get",
  path: "/topics/{id}",
  tags,
  summary: "One topic",
  request: { params: IdParam("top") },
  responses: { 200: jsonResponse(TopicSchema, "The topic"), 404: errorResponse("No such topic") },
});

const updateRoute = keyedRoute(
  "contacts",
  {
    method: "patch",
    path: "/topics/{id}",
    tags,
    summary: "Rename a topic, or change its description or default",
    request: { params: IdParam("top"), body: jsonBody(topicChangeInput) },
    responses: { 200: jsonResponse(TopicSchema, "The topic"), 404: errorResponse("No such topic") },
  },
  { liveKeyOnly: "Changing a topic" },
);

const deleteRoute = keyedRoute(
  "contacts",
  {
    method: "delete",
    path: "/topics/{id}",
    tags,
    summary: "Delete a topic and every contact's choice for it",
    description: "Campaigns and automation steps that named it send to their audience as if they named none.",
    request: { params: IdParam("top") },
    responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), 404: errorResponse("No such topic") },
  },
  { liveKeyOnly: "Deleting a topic" },
);

export const topicRoutes = createRouter()
  .openapi(createRoute, async (c) => {
    const body = c.req.valid("json");
    const { topic } = orRefuse(
      await createTopic(c.var.ctx.db, c.get("auth").account.id, {
        name: body.name,
        description: body.description,
        defaultSubscribed: body.default_subscribed,
      }),
    );
    return c.json(serializeTopic(topic), 201);
  })
  .openapi(listRoute, async (c) => {
    const { cursor, limit } = c.req.valid("query");
    return c.json(pageOf(await listTopics(c.var.ctx.db, c.get("auth").account.id, { cursor, limit }), limit, serializeTopic), 200);
  })
  .openapi(getRoute, async (c) => {
    const topic = await findTopic(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!topic) throw notFound("Topic");
    return c.json(serializeTopic(topic), 200);
  })
  .openapi(updateRoute, async (c) => {
    const body = c.req.valid("json");
    const outcome = orRefuse(
      await updateTopic(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, {
        name: body.name,
        description: body.description,
        defaultSubscribed: body.default_subscribed,
      }),
    );
    if (outcome.kind === "not_found") throw notFound("Topic");
    return c.json(serializeTopic(outcome.topic), 200);
  })
  .openapi(deleteRoute, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await deleteTopic(c.var.ctx.db, c.get("auth").account.id, id))) throw notFound("Topic");
    return c.json({ id, deleted: true as const }, 200);
  });
