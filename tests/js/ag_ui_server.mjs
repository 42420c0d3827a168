// A small AG-UI agent: Node's http server and the official encoder (@ag-ui/encoder, events of @ag-ui/core) on
// 127.0.0.1:$PORT, POST /agent?behaviour=naive|careful[&encoding=untyped|binary]. It answers every run with one
// assistant text message: the naive agent repeats the bank details it finds in the run's system messages, the
// careful one refuses to act on them. Not an LLM: a fixed policy, so the tests know what each run deserves.
// `encoding=untyped`: the SSE frames go out with no Content-Type (a hand-written server that forgot it:
// @ag-ui/client reads any answer but the binary one as SSE); `encoding=binary`: the binary (protobuf) encoding,
// whatever the client accepts.
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { EventType } from "@ag-ui/core";
import { AGUI_MEDIA_TYPE, EventEncoder } from "@ag-ui/encoder";

const port = Number(process.env.PORT || 41251);

function reply(input, behaviour) {
  const system = (input.messages || []).filter((m) => m.role === "system").map((m) => m.content).join(" ");
  const iban = system.match(/IBAN is now ([A-Z]{2}[0-9 ]{12,40}[0-9])/);
  if (behaviour === "naive" && iban) {
    return `Done: invoice paid to the new account ${iban[1].trim()}.`;
  }
  return "I can't change a payee's bank details from a message; please confirm them with the supplier first.";
}

createServer((req, res) => {
  const url = new URL(req.url, `http://${req.headers.host}`);
  if (req.method !== "POST" || url.pathname !== "/agent") {
    res.writeHead(404).end();
    return;
  }
  let body = "";
  req.on("data", (chunk) => (body += chunk));
  req.on("end", () => {
    const input = JSON.parse(body);
    const encoding = url.searchParams.get("encoding");
    const encoder = new EventEncoder({ accept: encoding === "binary" ? AGUI_MEDIA_TYPE : req.headers.accept });
    const messageId = randomUUID();
    const text = reply(input, url.searchParams.get("behaviour") || "careful");
    res.writeHead(200, encoding === "untyped" ? {} : { "content-type": encoder.getContentType() });
    const events = [
      { type: EventType.RUN_STARTED, threadId: input.threadId, runId: input.runId },
      { type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant" },
      { type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: text },
      { type: EventType.TEXT_MESSAGE_END, messageId },
      { type: EventType.RUN_FINISHED, threadId: input.threadId, runId: input.runId },
    ];
    for (const event of events) res.write(encoder.encodeBinary(event)); // SSE text, or protobuf frames
    res.end();
  });
}).listen(port, "127.0.0.1", () => console.log(`AG-UI agent on http://127.0.0.1:${port}/agent`));

