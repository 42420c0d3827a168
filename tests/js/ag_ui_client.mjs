// An AG-UI client built on the official @ag-ui/client (HttpAgent): runs the agent at URL once on thread
// THREAD with the messages of the JSON file MESSAGES and prints {messages} (the thread's messages after the
// run: role and content) as one JSON line.
// Usage: node ag_ui_client.mjs URL THREAD MESSAGES.json
import { readFileSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";

const [url, threadId, messagesFile] = process.argv.slice(2);
if (!url || !threadId || !messagesFile) {
  console.error("usage: node ag_ui_client.mjs URL THREAD MESSAGES.json");
  process.exit(2);
}
const agent = new HttpAgent({ url, threadId, initialMessages: JSON.parse(readFileSync(messagesFile, "utf-8")) });
await agent.runAgent({ runId: "run-1" });
console.log(JSON.stringify({ messages: agent.messages.map((m) => ({ role: m.role, content: m.content })) }));
