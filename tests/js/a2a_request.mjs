// What the @a2a-js/sdk drivers share: a user's text as a `SendMessageRequest` (protocol v1.0, as the SDK's client
// takes it), and the texts of an answer's parts.
import { randomUUID } from "node:crypto";
import { Role } from "@a2a-js/sdk";

export function textRequest(text) {
  return {
    tenant: "",
    message: {
      messageId: randomUUID(), contextId: "", taskId: "", role: Role.ROLE_USER,
      parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
      metadata: undefined, extensions: [], referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
}

export const partsText = (parts) => (parts || []).filter((p) => p.content?.$case === "text").map((p) => p.content.value);
