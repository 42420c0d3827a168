// An orchestrator written on `fetch` alone (undici's, which is Node's), no A2A SDK: reads the Agent Card at
// BASE_URL, then sends TEXT to the card's JSON-RPC interface with `SendMessage` (A2A 1.0). Its body is a string
// and it sets no Content-Type, so fetch sends it as `text/plain;charset=UTF-8` (the Fetch standard's type of a
// string body). Through PROXY (undici's ProxyAgent) when given. Prints {contentType, texts} as one JSON line:
// the type the request went with, and the text of the answer's message or task status.
// Usage: node a2a_fetch_client.mjs BASE_URL TEXT [PROXY]
import { randomUUID } from "node:crypto";
import { fetch, ProxyAgent, Request } from "undici";

const [baseUrl, text, proxy] = process.argv.slice(2);
if (!baseUrl || text === undefined) {
  console.error("usage: node a2a_fetch_client.mjs BASE_URL TEXT [PROXY]");
  process.exit(2);
}
const dispatcher = proxy ? new ProxyAgent(proxy) : undefined;
const card = await (await fetch(new URL("/.well-known/agent-card.json", baseUrl), { dispatcher })).json();
const endpoint = card.supportedInterfaces.find((i) => i.protocolBinding === "JSONRPC").url;
const request = new Request(endpoint, {
  method: "POST",
  headers: { "A2A-Version": "1.0" },
  body: JSON.stringify({
    jsonrpc: "2.0", id: 1, method: "SendMessage",
    params: { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] } },
  }),
});
const contentType = request.headers.get("content-type");
const answer = await (await fetch(request, { dispatcher })).json();
const message = answer.result?.message ?? answer.result?.task?.status?.message;
const texts = (message?.parts || []).map((p) => p.text);
console.log(JSON.stringify({ contentType, texts, error: answer.error ?? null }));
