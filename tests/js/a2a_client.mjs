// An A2A client built on the official JavaScript SDK (@a2a-js/sdk, protocol v1.0): resolves the Agent Card at
// BASE_URL, sends TEXT with `SendMessage` over the chosen binding and prints {binding, kind, texts} (the text
// of the answer's message, artifacts and status message) as one JSON line.
// Usage: node a2a_client.mjs BASE_URL JSONRPC|HTTP+JSON TEXT
import { randomUUID } from "node:crypto";
import { Role } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";

const [baseUrl, binding, text] = process.argv.slice(2);
if (!baseUrl || !["JSONRPC", "HTTP+JSON"].includes(binding) || text === undefined) {
  console.error("usage: node a2a_client.mjs BASE_URL JSONRPC|HTTP+JSON TEXT");
  process.exit(2);
}
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] }));
const client = await factory.createFromUrl(baseUrl);
const result = await client.sendMessage({
  tenant: "",
  message: {
    messageId: randomUUID(), contextId: "", taskId: "", role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
    metadata: undefined, extensions: [], referenceTaskIds: [],
  },
  configuration: undefined,
  metadata: undefined,
});
const partsText = (parts) => (parts || []).filter((p) => p.content?.$case === "text").map((p) => p.content.value);
const texts = "parts" in result
  ? partsText(result.parts)
  : [...(result.artifacts || []).flatMap((a) => partsText(a.parts)), ...partsText(result.status?.message?.parts)];
console.log(JSON.stringify({ binding, kind: "parts" in result ? "message" : "task", texts }));
