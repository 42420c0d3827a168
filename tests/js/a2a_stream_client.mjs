// An A2A client built on the official JavaScript SDK (@a2a-js/sdk, protocol v1.0) that streams: resolves the
// Agent Card at BASE_URL, sends TEXT with `SendStreamingMessage` (JSON-RPC) and prints {events, texts} (the kind
// of each streamed event; the text of every message, task status message and artifact in them) as one JSON line.
// Through PROXY when given: undici's ProxyAgent as the global dispatcher, which Node's fetch (the SDK's) uses.
// Usage: node a2a_stream_client.mjs BASE_URL TEXT [PROXY]
import { ProxyAgent, setGlobalDispatcher } from "undici";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { partsText, textRequest } from "./a2a_request.mjs";

const [baseUrl, text, proxy] = process.argv.slice(2);
if (!baseUrl || text === undefined) {
  console.error("usage: node a2a_stream_client.mjs BASE_URL TEXT [PROXY]");
  process.exit(2);
}
if (proxy) setGlobalDispatcher(new ProxyAgent(proxy));
const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ["JSONRPC"] });
const client = await new ClientFactory(options).createFromUrl(baseUrl);
const stream = client.sendMessageStream(textRequest(text));
const events = [];
const texts = [];
for await (const event of stream) {
  const { $case, value } = event.payload || {};
  events.push($case);
  if ($case === "message") texts.push(...partsText(value.parts));
  if ($case === "task" || $case === "statusUpdate") texts.push(...partsText(value.status?.message?.parts));
  if ($case === "artifactUpdate") texts.push(...partsText(value.artifact?.parts));
}
console.log(JSON.stringify({ events, texts }));
