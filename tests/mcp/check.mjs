// Drives `sbx mcp` with the official MCP TypeScript SDK over stdio.
// Usage: node check.mjs SBX open|bound [SB OTHER_SB]
// MCP_HAVE: comma-separated verbs of the sbx under test beyond the base set (exec_json, fs,
// jobs, json_errors); the checks of a missing one are reported as "skip", never as "ok".
// Prints one line per check ("ok - ...", "not ok - ...", "skip - ..."), exits 1 on a failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import Ajv from "ajv";

const [sbx, mode, boundSb, otherSb] = process.argv.slice(2);
const have = new Set((process.env.MCP_HAVE || "").split(",").filter(Boolean));
let failed = 0;

function ok(desc) { console.log(`ok - ${desc}`); }
function notOk(desc, why) { failed++; console.log(`not ok - ${desc}: ${why}`); }
function skip(desc, feature) {
  console.log(`skip - ${desc}: needs '${feature}', not in this sbx yet`);
}
function assert(cond, why) { if (!cond) throw new Error(why); }
function eq(a, b, what) {
  assert(JSON.stringify(a) === JSON.stringify(b),
    `${what}: got ${JSON.stringify(a)}, want ${JSON.stringify(b)}`);
}
async function check(desc, fn, feature) {
  if (feature && !have.has(feature)) return skip(desc, feature);
  try { await fn(); ok(desc); } catch (e) { notOk(desc, e && e.stack || e); }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(fn, what, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

const args = mode === "bound" ? ["mcp", "--sandbox", boundSb] : ["mcp"];
const transport = new StdioClientTransport({
  command: sbx, args, stderr: "inherit",
  env: { PATH: "/usr/bin:/bin", SBX_HOME: process.env.SBX_HOME },
});
const client = new Client({ name: "sbx-mcp-check", version: "1.0.0" });
await client.connect(transport);

// a tool that works: its structured result (the SDK checked it against the outputSchema)
async function call(name, a) {
  const r = await client.callTool({ name, arguments: a });
  if (r.isError) throw new Error(`${name} failed: ${r.content?.[0]?.text}`);
  assert(r.structuredContent, `${name}: no structuredContent`);
  eq(JSON.parse(r.content[0].text), r.structuredContent, `${name}: text and structured`);
  return r.structuredContent;
}
// a tool that fails as a tool: isError with {"error": {"code", "message"}}; the code is
// checked when sbx mcp chose it (own), or the verbs report theirs as JSON
async function callFails(name, a, code, own = false) {
  const r = await client.callTool({ name, arguments: a });
  assert(r.isError === true, `${name} did not fail: ${JSON.stringify(r)}`);
  const e = r.structuredContent?.error;
  assert(e && typeof e.code === "string" && typeof e.message === "string",
    `${name}: no error object: ${JSON.stringify(r)}`);
  if (code && (own || have.has("json_errors"))) eq(e.code, code, `${name}: error code`);
  return e;
}
// a call the server refuses as a protocol error
async function callRefused(name, a, code) {
  try {
    await client.callTool({ name, arguments: a });
  } catch (e) {
    assert(e instanceof McpError, `not an McpError: ${e}`);
    eq(e.code, code, `${name}: JSON-RPC error code`);
    return;
  }
  throw new Error(`${name} with ${JSON.stringify(a)} was not refused`);
}

const allTools = ["sandbox_create", "sandbox_ls", "sandbox_inspect", "sandbox_exec", "fs_read",
  "fs_write", "fs_ls", "fs_edit", "file_upload", "file_download", "sandbox_ps", "sandbox_logs",
  "sandbox_kill", "sandbox_preview", "sandbox_pause", "sandbox_resume", "sandbox_rm"];
const globalTools = ["sandbox_create", "sandbox_ls", "sandbox_rm"];
let tools = [];

await check("the server says who it is and what it offers", async () => {
  eq(client.getServerVersion().name, "sbx", "serverInfo.name");
  const caps = client.getServerCapabilities();
  assert(caps.tools && caps.resources, `capabilities ${JSON.stringify(caps)}`);
  await client.ping();
});

await check("tools/list: every tool, each schema compiles with ajv", async () => {
  tools = (await client.listTools()).tools;
  const want = mode === "bound" ? allTools.filter((t) => !globalTools.includes(t)) : allTools;
  eq(tools.map((t) => t.name).sort(), [...want].sort(), "tool names");
  const ajv = new Ajv({ strict: false });
  for (const t of tools) {
    assert(t.inputSchema.type === "object", `${t.name}: inputSchema type`);
    assert(t.inputSchema.additionalProperties === false, `${t.name}: additionalProperties`);
    ajv.compile(t.inputSchema);
    ajv.compile(t.outputSchema);
    assert(typeof t.description === "string" && t.description, `${t.name}: description`);
    const takesSb = "sandbox" in t.inputSchema.properties;
    if (mode === "bound") assert(!takesSb, `${t.name} takes a sandbox in bound mode`);
    else if (!["sandbox_create", "sandbox_ls"].includes(t.name))
      assert(takesSb && t.inputSchema.required.includes("sandbox"), `${t.name}: sandbox`);
  }
  // and the schemas say no to what the server refuses
  const exec = ajv.compile(tools.find((t) => t.name === "sandbox_exec").inputSchema);
  assert(!exec({ ...(mode === "bound" ? {} : { sandbox: "x" }), command: 3 }), "command: 3");
});

let sb = boundSb;
const S = (a) => (mode === "bound" ? a : { sandbox: sb, ...a });

if (mode === "open") {
  await check("sandbox_create makes a sandbox; sandbox_ls and sandbox_inspect show it",
    async () => {
      const rec = await call("sandbox_create", { labels: { made_by: "t0180" } });
      sb = rec.id;
      assert(/^[0-9a-f]{12}$/.test(sb), `id ${sb}`);
      const ls = await call("sandbox_ls", {});
      assert(ls.sandboxes.some((r) => r.id === sb), "not in sandbox_ls");
      eq((await call("sandbox_inspect", S({}))).state, "running", "state");
    });
  await check("sandbox_create: net host is the CLI's only; net none works (control)", async () => {
    await callFails("sandbox_create", { net: "host" }, "invalid_argument", true);
    await callFails("sandbox_create", { labels: { "a=b": "c" } }, "invalid_argument", true);
    const r = await call("sandbox_create", { net: "none", labels: { made_by: "t0180" } });
    eq((await call("sandbox_rm", { sandbox: r.id, force: true })).removed, true, "removed");
  });
  await check("a sandbox that does not exist: a tool error", async () => {
    await callFails("sandbox_inspect", { sandbox: "no-such-sandbox" }, "not_found");
  });
  await check("a sandbox argument that is an option is refused", async () => {
    await callFails("sandbox_inspect", { sandbox: "--help" }, "invalid_argument", true);
  });
} else {
  await check("--sandbox: the tools reach the bound sandbox (control)", async () => {
    eq((await call("sandbox_inspect", {})).id, boundSb, "inspect's id");
  });
  await check("--sandbox: another sandbox cannot be named, nor created, listed, removed",
    async () => {
      await callRefused("sandbox_inspect", { sandbox: otherSb }, -32602);
      await callRefused("sandbox_exec", { sandbox: otherSb, command: ["true"] }, -32602);
      for (const t of globalTools) await callRefused(t, {}, -32602);
    });
  await check("--sandbox: resources are the bound sandbox's only", async () => {
    const res = (await client.listResources()).resources;
    eq(res.map((r) => r.uri), [`sbx://${boundSb}/logs`], "resources");
    await client.readResource({ uri: `sbx://${boundSb}/logs` });
    try {
      await client.readResource({ uri: `sbx://${otherSb}/logs` });
      throw new Error("read another sandbox's logs");
    } catch (e) {
      assert(e instanceof McpError && e.code === -32002, `wrong refusal ${e}`);
    }
  });
}

await check("unknown tool and bad arguments are JSON-RPC errors -32602", async () => {
  await callRefused("no_such_tool", {}, -32602);
  await callRefused("file_download", S({}), -32602);
  await callRefused("file_download", S({ path: 7 }), -32602);
  await callRefused("file_download", S({ path: "/etc/hostname", extra: 1 }), -32602);
});

await check("file_upload and file_download carry every byte value", async () => {
  const bytes = Buffer.from([...Array(256).keys(), ...Array(256).keys()]);
  eq((await call("file_upload", S({ path: "/tmp/mcp-bytes", content_base64:
    bytes.toString("base64"), mode: "0640" }))).bytes, 512, "bytes");
  const d = await call("file_download", S({ path: "/tmp/mcp-bytes" }));
  eq(d.size, 512, "size");
  assert(Buffer.from(d.content_base64, "base64").equals(bytes), "content differs");
  await callFails("file_download", S({ path: "/tmp/no-such-file" }));
  await callFails("file_download", S({ path: "/tmp" }), "invalid_argument", true);
  await callFails("file_download", S({ path: "/tmp/mcp-bytes\u0000x" }), "invalid_argument", true);
  await callFails("file_upload", S({ path: "/tmp/x", content_base64: "!!" }), "invalid_argument", true);
});

await check("sandbox_exec: argv, a shell string, status, streams, env, workdir", async () => {
  let r = await call("sandbox_exec", S({ command: ["sh", "-c", "echo out; echo err >&2; exit 3"] }));
  eq([r.exit_code, r.stdout, r.stderr, r.timed_out], [3, "out\n", "err\n", false], "result");
  r = await call("sandbox_exec", S({ command: "echo $A; pwd", env: { A: "a b" }, workdir: "/tmp" }));
  eq([r.exit_code, r.stdout], [0, "a b\n/tmp\n"], "shell string");
  r = await call("sandbox_exec", S({ command: ["head", "-c", "100000", "/dev/zero"], max_output: "1k" }));
  eq([r.stdout_truncated, r.stdout_bytes], [true, 100000], "max_output");
  r = await call("sandbox_exec", S({ command: ["sleep", "30"], timeout: "1s" }));
  eq(r.timed_out, true, "timed_out");
  // a program that is not there: the exec object with 127, or a tool error saying so
  const nf = await client.callTool({ name: "sandbox_exec", arguments: S({ command: ["/no/such"] }) });
  if (nf.isError) eq(nf.structuredContent.error.code, "command_not_found", "error code");
  else eq(nf.structuredContent.exit_code, 127, "exit code");
}, "exec_json");

await check("fs_write, fs_read, fs_ls: text and base64", async () => {
  eq((await call("fs_write", S({ path: "/workspace/mcp/a.txt", content: "hello\nworld\n" })))
    .bytes, 12, "bytes");
  eq(await call("fs_read", S({ path: "/workspace/mcp/a.txt" })),
    { path: "/workspace/mcp/a.txt", encoding: "text", content: "hello\nworld\n", size: 12 },
    "read");
  await call("fs_write", S({ path: "/workspace/mcp/b.bin", content: "AP8=", encoding: "base64" }));
  const b = await call("fs_read", S({ path: "/workspace/mcp/b.bin" }));
  eq([b.encoding, b.content], ["base64", "AP8="], "bytes that are no text come as base64");
  const ls = await call("fs_ls", S({ path: "/workspace/mcp" }));
  const a = ls.entries.find((e) => e.name === "a.txt");
  assert(a && a.type === "file" && a.size === 12, `ls: ${JSON.stringify(ls)}`);
  await callFails("fs_read", S({ path: "/workspace/mcp/none" }), "not_found");
}, "fs");

await check("fs_edit: exactly once, or replace_all; else an error", async () => {
  await call("fs_write", S({ path: "/workspace/e.txt", content: "a-x-a\n", mode: "0600" }));
  await callFails("fs_edit", S({ path: "/workspace/e.txt", old_string: "a", new_string: "b" }),
    "invalid_argument");
  await callFails("fs_edit", S({ path: "/workspace/e.txt", old_string: "zz", new_string: "b" }),
    "not_found");
  eq((await call("fs_edit", S({ path: "/workspace/e.txt", old_string: "x", new_string: "y" })))
    .replacements, 1, "once");
  eq((await call("fs_edit", S({ path: "/workspace/e.txt", old_string: "a", new_string: "b",
    replace_all: true }))).replacements, 2, "all");
  eq((await call("fs_read", S({ path: "/workspace/e.txt" }))).content, "b-y-b\n", "content");
  const st = (await call("fs_ls", S({ path: "/workspace" }))).entries.find((e) => e.name === "e.txt");
  eq(st.mode, "0600", "the file keeps its mode");
}, "fs");

await check("background commands: sandbox_ps, sandbox_logs, the exec log resource, sandbox_kill",
  async () => {
    const { exec_id } = await call("sandbox_exec", S({ command: "echo started; sleep 60",
      background: true }));
    assert(/^[A-Za-z0-9._-]{1,64}$/.test(exec_id), `exec id ${exec_id}`);
    const ps = await call("sandbox_ps", S({}));
    const e = ps.execs.find((x) => x.id === exec_id);
    assert(e && e.state === "running", `ps: ${JSON.stringify(ps)}`);
    await until(async () => (await call("sandbox_logs", S({ exec_id }))).logs === "started\n",
      "the log");
    const res = await client.readResource({ uri: `sbx://${sb}/exec/${exec_id}/logs` });
    eq(res.contents[0].text, "started\n", "resource");
    await call("sandbox_kill", S({ exec_id }));
    await until(async () => (await call("sandbox_ps", S({}))).execs
      .find((x) => x.id === exec_id).state === "exited", "the command to end");
  }, "jobs");

await check("resources: templates, the sandbox's log", async () => {
  const t = (await client.listResourceTemplates()).resourceTemplates.map((x) => x.uriTemplate);
  assert(t.some((u) => u.endsWith("/exec/{exec_id}/logs")), `templates ${t}`);
  const r = await client.readResource({ uri: `sbx://${sb}/logs` });
  eq(r.contents[0].mimeType, "text/plain", "mimeType");
  try {
    await client.readResource({ uri: "file:///etc/passwd" });
    throw new Error("a file: URI was read");
  } catch (e) {
    assert(e instanceof McpError && e.code === -32002, `wrong refusal ${e}`);
  }
});

await check("sandbox_preview returns a loopback URL", async () => {
  const p = await call("sandbox_preview", S({ port: 8080 }));
  assert(p.url.startsWith("http://127.0.0.1:"), `url ${p.url}`);
});

await check("sandbox_pause and sandbox_resume", async () => {
  eq((await call("sandbox_pause", S({}))).state, "paused", "paused");
  eq((await call("sandbox_resume", S({}))).state, "running", "running");
});

if (mode === "open") {
  await check("sandbox_rm removes it", async () => {
    eq((await call("sandbox_rm", S({ force: true }))).removed, true, "removed");
    await callFails("sandbox_inspect", S({}), "not_found");
  });
}

await client.close();
process.exit(failed ? 1 : 0);
