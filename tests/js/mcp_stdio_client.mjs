// An MCP client built on the official TypeScript SDK (@modelcontextprotocol/sdk) over stdio: starts COMMAND
// ARGS… as its server (StdioClientTransport), offers one root (so a server that asks, as server-everything
// does after `initialized`, sends a `roots/list` request the client answers), waits for the server's log
// message about it when SYNC_ROOTS is "roots", lists the tools, calls `echo` with MESSAGE, then ends the
// server's stdin and waits for the server to exit by itself. Prints {tools, echo, exit} as one JSON line.
// Usage: node mcp_stdio_client.mjs MESSAGE roots|no-roots COMMAND [ARGS…]
//
// Why not `client.close()` alone: the SDK's close ends stdin, then sends SIGTERM to a server still running
// 2 s later (SIGKILL 2 s after that). A server that takes longer to wind down on a loaded machine would be
// cut short; the test wants the session's natural end, so the driver waits for the exit (the transport's
// child process is reached through its private `_process`: the SDK has no public way to end stdin alone).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ListRootsRequestSchema, LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [message, roots, command, ...args] = process.argv.slice(2);
if (message === undefined || !["roots", "no-roots"].includes(roots) || !command) {
  console.error("usage: node mcp_stdio_client.mjs MESSAGE roots|no-roots COMMAND [ARGS…]");
  process.exit(2);
}
const transport = new StdioClientTransport({ command, args, stderr: "inherit", env: process.env });
const client = new Client({ name: "oatf-watch-js-stdio-client", version: "1.0.0" },
  { capabilities: roots === "roots" ? { roots: { listChanged: false } } : {} });
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: "file:///work/notes", name: "notes" }] }));
let rootsLogged;
const rootsSynced = new Promise((resolve) => { rootsLogged = resolve; });
client.setNotificationHandler(LoggingMessageNotificationSchema, async (notification) => {
  if (String(notification.params.data).startsWith("Roots updated")) rootsLogged();
});
await client.connect(transport);
if (roots === "roots") await rootsSynced;
const { tools } = await client.listTools();
const result = await client.callTool({ name: "echo", arguments: { message } });
const child = transport._process;
const exited = new Promise((resolve) => child.once("close", (code, signal) => resolve({ code, signal })));
child.stdin.end();
const exit = await exited;
await client.close();
console.log(JSON.stringify({ tools: tools.map((t) => t.name), echo: result.content.map((c) => c.text), exit }));
