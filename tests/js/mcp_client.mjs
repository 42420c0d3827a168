// An MCP client built on the official TypeScript SDK (@modelcontextprotocol/sdk): connects to URL over the
// given transport, lists the tools, calls `echo` with MESSAGE and prints {tools, echo} as one JSON line.
// Usage: node mcp_client.mjs URL streamableHttp|sse MESSAGE
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, kind, message] = process.argv.slice(2);
if (!url || !["streamableHttp", "sse"].includes(kind) || message === undefined) {
  console.error("usage: node mcp_client.mjs URL streamableHttp|sse MESSAGE");
  process.exit(2);
}
const transport = kind === "sse" ? new SSEClientTransport(new URL(url)) : new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "oatf-watch-js-client", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const result = await client.callTool({ name: "echo", arguments: { message } });
if (kind === "streamableHttp") {
  await transport.terminateSession();
}
await client.close();
console.log(JSON.stringify({ tools: tools.map((t) => t.name), echo: result.content.map((c) => c.text) }));
