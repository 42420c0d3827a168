// A small A2A agent built on the official JavaScript SDK (@a2a-js/sdk, protocol v1.0): an agent executor that
// answers every message with a completed task holding one artifact, served over JSON-RPC (/a2a/jsonrpc) and
// HTTP+JSON/REST (/a2a/rest), with its Agent Card at the well-known path. It listens on 127.0.0.1:$PORT; the
// card advertises $PUBLIC_URL (default: its own address), e.g. a reverse proxy in front of it.
import { randomUUID } from "node:crypto";
import express from "express";
import { AGENT_CARD_PATH, Role, TaskState } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const port = Number(process.env.PORT || 41241);
const publicUrl = (process.env.PUBLIC_URL || `http://127.0.0.1:${port}`).replace(/\/$/, "");

const CARD_DESCRIPTION = "Books meeting rooms for the team and confirms each booking";

const card = {
  name: "Room Booker",
  description: CARD_DESCRIPTION,
  supportedInterfaces: [
    { url: `${publicUrl}/a2a/jsonrpc`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    { url: `${publicUrl}/a2a/rest`, protocolBinding: "HTTP+JSON", tenant: "", protocolVersion: "1.0" },
  ],
  provider: undefined,
  version: "1.0.0",
  capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ["text"],
  defaultOutputModes: ["text"],
  skills: [
    {
      id: "book_room",
      name: "Book a room",
      description: "Books a meeting room and answers with the booking reference",
      tags: ["booking"],
      examples: ["book room 4 at 10:00"],
      inputModes: ["text"],
      outputModes: ["text"],
      securityRequirements: [],
    },
  ],
  documentationUrl: "",
  signatures: [],
};

const textPart = (value) => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });

class RoomBooker {
  async execute(requestContext, eventBus) {
    const { taskId, contextId, userMessage } = requestContext;
    const asked = userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join(" ");
    eventBus.publish(AgentEvent.task({
      id: taskId,
      contextId,
      status: { state: TaskState.TASK_STATE_WORKING, timestamp: new Date().toISOString(), message: undefined },
      artifacts: [],
      history: [userMessage],
      metadata: undefined,
    }));
    eventBus.publish(AgentEvent.artifactUpdate({
      taskId,
      contextId,
      artifact: {
        artifactId: randomUUID(),
        name: "booking",
        description: "",
        parts: [textPart(`Booked: ${asked}. Reference RB-1042.`)],
        metadata: undefined,
        extensions: [],
      },
      lastChunk: true,
      append: false,
      metadata: undefined,
    }));
    eventBus.publish(AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: {
        state: TaskState.TASK_STATE_COMPLETED,
        timestamp: new Date().toISOString(),
        message: {
          role: Role.ROLE_AGENT, messageId: randomUUID(), parts: [textPart("Your room is booked.")], taskId, contextId,
          extensions: [], metadata: undefined, referenceTaskIds: [],
        },
      },
      metadata: undefined,
    }));
  }

  async cancelTask() {}
}

const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new RoomBooker());
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
app.use("/a2a/jsonrpc", jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
app.use("/a2a/rest", restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, "127.0.0.1", (err) => {
  if (err) throw err;
  console.log(`A2A agent on http://127.0.0.1:${port} (card advertises ${publicUrl})`);
});
