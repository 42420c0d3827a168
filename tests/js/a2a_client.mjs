// An A2A client built on the official JavaScript SDK (@a2a-js/sdk, protocol v1.0): resolves the Agent Card at
// BASE_URL, sends TEXT with `SendMessage` over the chosen binding and prints {binding, kind, texts} (the text
// of the answer's message, artifacts and status message) as one JSON line.
// Usage: node a2a_client.mjs BASE_URL JSONRPC|HTTP+JSON TEXT
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { partsText, textRequest } from "./a2a_request.mjs";

const [baseUrl, binding, text] = process.argv.slice(2);
if (!baseUrl || !["JSONRPC", "HTTP+JSON"].includes(binding) || text === undefined) {
  console.error("usage: node a2a_client.mjs BASE_URL JSONRPC|HTTP+JSON TEXT");
  process.exit(2);
}
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] }));
const client = await factory.createFromUrl(baseUrl);
const result = await client.sendMessage(textRequest(text));
const texts = "parts" in result
  ? partsText(result.parts)
  : [...(result.artifacts || []).flatMap((a) => partsText(a.parts)), ...partsText(result.status?.message?.parts)];
console.log(JSON.stringify({ binding, kind: "parts" in result ? "message" : "task", texts }));
