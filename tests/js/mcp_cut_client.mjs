// An MCP client written on `fetch` alone (Streamable HTTP by hand, no MCP SDK) whose `echo` call is cut at a
// byte limit: it initializes, lists the tools, then calls `echo` with TEXT, the UTF-8 bytes of TEXT cut at
// LIMIT bytes — in the middle of a character when one spans the limit, as code that truncates bytes does — so
// the request body is not valid UTF-8. Prints {tools, echo} as one JSON line: the tools listed and the text of
// `echo`'s answer, as the server read the call.
// Usage: node mcp_cut_client.mjs URL TEXT LIMIT
const [url, text, limit] = process.argv.slice(2);
if (!url || text === undefined || !limit) {
  console.error("usage: node mcp_cut_client.mjs URL TEXT LIMIT");
  process.exit(2);
}
let session = null;

async function post(body) {
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  if (session) Object.assign(headers, { "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" });
  const response = await fetch(url, { method: "POST", headers, body });
  session = response.headers.get("mcp-session-id") ?? session;
  const answer = await response.text();
  if (!answer) return null;
  if (!(response.headers.get("content-type") || "").startsWith("text/event-stream")) return JSON.parse(answer);
  const data = answer.split(/\r?\n/).filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim());
  return JSON.parse(data.find((d) => d.startsWith("{")));
}

const json = (message) => JSON.stringify({ jsonrpc: "2.0", ...message });
await post(json({ id: 1, method: "initialize", params: {
  protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "cut-client", version: "1.0.0" } } }));
await post(json({ method: "notifications/initialized" }));
const listed = await post(json({ id: 2, method: "tools/list" }));
const cut = new TextEncoder().encode(text).slice(0, Number(limit));
const [head, tail] = json({ id: 3, method: "tools/call", params: { name: "echo", arguments: { message: "\u0000" } } })
  .split("\\u0000");
const encoder = new TextEncoder();
const body = new Uint8Array([...encoder.encode(head), ...cut, ...encoder.encode(tail)]);
const called = await post(body);
console.log(JSON.stringify({
  tools: listed.result.tools.map((t) => t.name),
  echo: (called.result?.content || []).map((c) => c.text),
}));
