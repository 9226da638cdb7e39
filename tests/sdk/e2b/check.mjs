// Drives sbx's loopback E2B fake (tests/fakes/e2b.py) with the official e2b SDK.
// The SDK finds the fake through its own variables:
//   E2B_API_URL=E2B_SANDBOX_URL=http://127.0.0.1:PORT E2B_API_KEY=KEY E2B_DOMAIN=DOMAIN
// Prints one line per check ("ok - ..."); exits 1 at the first failure ("not ok - ...").
import {
  CommandExitError,
  FileNotFoundError,
  InvalidArgumentError,
  NotFoundError,
  Sandbox,
  SandboxError,
  SandboxNotFoundError,
  TimeoutError,
} from 'e2b'

for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[v]) {
    console.error(`check.mjs: ${v} is not set`)
    process.exit(2)
  }
}

const run = `r${process.pid}`
const made = []
let n = 0

async function cleanup() {
  for (const sb of made) {
    await sb.kill().catch(() => undefined)
  }
}

async function check(desc, fn) {
  n++
  try {
    await fn()
    console.log(`ok ${n} - ${desc}`)
  } catch (err) {
    console.log(`not ok ${n} - ${desc}`)
    console.log(`# ${err && err.stack ? err.stack : err}`)
    await cleanup()
    process.exit(1)
  }
}

function eq(got, want, what) {
  const g = JSON.stringify(got)
  const w = JSON.stringify(want)
  if (g !== w) {
    throw new Error(`${what}: got ${g}, want ${w}`)
  }
}

function truthy(v, what) {
  if (!v) {
    throw new Error(`${what}: got ${JSON.stringify(v)}`)
  }
}

// rejects(promise, Class, what) -> the error, which must be an instance of Class
async function rejects(p, cls, what) {
  let err
  try {
    await p
  } catch (e) {
    err = e
  }
  if (err === undefined) {
    throw new Error(`${what}: did not fail`)
  }
  if (!(err instanceof cls)) {
    throw new Error(`${what}: failed with ${err.name}: ${err.message}, not ${cls.name}`)
  }
  return err
}

async function listAll(opts) {
  const pages = []
  const paginator = Sandbox.list(opts)
  while (paginator.hasNext) {
    pages.push(await paginator.nextItems())
    if (pages.length > 50) {
      throw new Error('more than 50 pages')
    }
  }
  return pages
}

let sb
let sb2

await check('Sandbox.create returns a sandbox with an id of [a-z0-9]', async () => {
  sb = await Sandbox.create('base', {
    envs: { FOO: 'bar' },
    metadata: { suite: 'check', run },
    timeoutMs: 120_000,
  })
  made.push(sb)
  truthy(/^[a-z0-9]+$/.test(sb.sandboxId), `sandboxId ${sb.sandboxId}`)
  eq(sb.sandboxDomain, process.env.E2B_DOMAIN || 'e2b.app', 'sandboxDomain')
})

await check('getInfo: running, template, metadata', async () => {
  const info = await sb.getInfo()
  eq(info.sandboxId, sb.sandboxId, 'sandboxId')
  eq(info.state, 'running', 'state')
  eq(info.templateId, 'base', 'templateId')
  eq(info.metadata, { suite: 'check', run }, 'metadata')
  truthy(info.endAt > info.startedAt, 'endAt after startedAt')
})

await check('commands.run: stdout and stderr apart, exit code 0', async () => {
  const r = await sb.commands.run('echo out-$FOO; echo err-line >&2; echo more-out')
  eq(r.exitCode, 0, 'exitCode')
  eq(r.stdout, 'out-bar\nmore-out\n', 'stdout')
  eq(r.stderr, 'err-line\n', 'stderr')
})

await check('commands.run: default cwd is /home/user, envs and cwd options apply', async () => {
  const r = await sb.commands.run('pwd; echo $HOME $X')
  eq(r.stdout, '/home/user\n/home/user\n', 'default cwd and HOME')
  const r2 = await sb.commands.run('pwd; echo $X', { cwd: '/tmp', envs: { X: 'y z' } })
  eq(r2.stdout, '/tmp\ny z\n', 'cwd and envs')
})

await check('commands.run: a non-zero exit is a CommandExitError with its exitCode', async () => {
  const err = await rejects(
    sb.commands.run('echo partial; echo oops >&2; exit 3'),
    CommandExitError,
    'exit 3'
  )
  eq(err.exitCode, 3, 'exitCode')
  eq(err.stdout, 'partial\n', 'stdout')
  eq(err.stderr, 'oops\n', 'stderr')
  eq(err.error, 'exit status 3', 'error')
})

await check('commands.run: onStdout and onStderr stream as output arrives', async () => {
  const out = []
  const errs = []
  const r = await sb.commands.run('for i in 1 2 3; do echo o$i; echo e$i >&2; sleep 0.1; done', {
    onStdout: (d) => out.push(d),
    onStderr: (d) => errs.push(d),
  })
  eq(out.join(''), 'o1\no2\no3\n', 'stdout chunks')
  eq(errs.join(''), 'e1\ne2\ne3\n', 'stderr chunks')
  truthy(out.length >= 2, `several stdout chunks (${out.length})`)
  eq(r.stdout, 'o1\no2\no3\n', 'result stdout')
})

await check('commands: stdin through sendStdin and closeStdin', async () => {
  const h = await sb.commands.run('cat; echo done', { background: true, stdin: true })
  await h.sendStdin('hello ')
  await h.sendStdin('stdin\n')
  await h.closeStdin()
  const r = await h.wait()
  eq(r.stdout, 'hello stdin\ndone\n', 'stdout')
})

await check('commands: list shows a background command, kill ends it with -1', async () => {
  const h = await sb.commands.run('sleep 30', { background: true })
  const procs = await sb.commands.list()
  truthy(procs.some((p) => p.pid === h.pid && p.cmd === '/bin/bash'), 'listed')
  eq(await sb.commands.kill(h.pid), true, 'kill')
  const err = await rejects(h.wait(), CommandExitError, 'killed command')
  eq(err.exitCode, -1, 'exitCode')
  eq(err.error, 'signal: killed', 'error')
  eq(await sb.commands.kill(h.pid), false, 'kill again')
})

await check('commands.run: timeoutMs ends a long command with a TimeoutError', async () => {
  const t0 = Date.now()
  await rejects(sb.commands.run('sleep 20', { timeoutMs: 1000 }), TimeoutError, 'sleep 20')
  truthy(Date.now() - t0 < 10_000, 'within 10 s')
})

await check('files: write and read text (multipart upload)', async () => {
  const info = await sb.files.write('/home/user/dir/hello.txt', 'hello text\n')
  eq(info.path, '/home/user/dir/hello.txt', 'path')
  eq(info.name, 'hello.txt', 'name')
  eq(await sb.files.read('/home/user/dir/hello.txt'), 'hello text\n', 'read back')
})

await check('files: write and read bytes (octet-stream upload, relative path)', async () => {
  const bytes = new Uint8Array([0, 1, 2, 10, 13, 127, 128, 255])
  const info = await sb.files.write('dir/bin.dat', bytes, { useOctetStream: true })
  eq(info.path, '/home/user/dir/bin.dat', 'path')
  const got = await sb.files.read('/home/user/dir/bin.dat', { format: 'bytes' })
  eq(Array.from(got), Array.from(bytes), 'bytes')
})

await check('files: several files in one multipart upload, empty file', async () => {
  const infos = await sb.files.write([
    { path: '/home/user/multi/a.txt', data: 'A' },
    { path: '/home/user/multi/b.txt', data: 'BB' },
    { path: '/home/user/multi/empty', data: '' },
  ])
  eq(infos.map((i) => i.path).sort(), [
    '/home/user/multi/a.txt', '/home/user/multi/b.txt', '/home/user/multi/empty'], 'paths')
  eq(await sb.files.read('/home/user/multi/b.txt'), 'BB', 'b.txt')
  eq(await sb.files.read('/home/user/multi/empty'), '', 'empty')
})

await check('files: list, exists, makeDir, rename, remove', async () => {
  const entries = await sb.files.list('/home/user/dir')
  eq(entries.map((e) => e.name).sort(), ['bin.dat', 'hello.txt'], 'names')
  const hello = entries.find((e) => e.name === 'hello.txt')
  eq(hello.type, 'file', 'type')
  eq(hello.size, 11, 'size')
  eq(hello.path, '/home/user/dir/hello.txt', 'entry path')
  eq(await sb.files.exists('/home/user/dir/hello.txt'), true, 'exists')
  eq(await sb.files.exists('/home/user/dir/nope'), false, 'exists (missing)')
  eq(await sb.files.makeDir('/home/user/newdir/sub'), true, 'makeDir')
  eq(await sb.files.makeDir('/home/user/newdir/sub'), false, 'makeDir again')
  const moved = await sb.files.rename('/home/user/dir/hello.txt', '/home/user/newdir/hi.txt')
  eq(moved.path, '/home/user/newdir/hi.txt', 'renamed')
  const deep = await sb.files.list('/home/user/newdir', { depth: 2 })
  eq(deep.map((e) => e.path).sort(), ['/home/user/newdir/hi.txt', '/home/user/newdir/sub'],
    'depth 2')
  eq(deep.find((e) => e.name === 'sub').type, 'dir', 'dir type')
  await sb.files.remove('/home/user/newdir')
  eq(await sb.files.exists('/home/user/newdir'), false, 'removed')
})

await check('files: missing file is FileNotFoundError, a directory InvalidArgumentError', async () => {
  await rejects(sb.files.read('/home/user/does/not/exist'), FileNotFoundError, 'missing')
  await rejects(sb.files.read('/home/user'), InvalidArgumentError, 'directory')
  await rejects(sb.files.list('/home/user/nope'), NotFoundError, 'list missing')
})

await check('files written by the SDK are seen by commands, and back', async () => {
  await sb.files.write('/tmp/via-sdk', 'from sdk')
  const r = await sb.commands.run('cat /tmp/via-sdk; printf from-cmd > /tmp/via-cmd')
  eq(r.stdout, 'from sdk', 'cat')
  eq(await sb.files.read('/tmp/via-cmd'), 'from-cmd', 'read')
})

await check('Sandbox.list pages through both sandboxes (limit 1)', async () => {
  sb2 = await Sandbox.create('base', { metadata: { suite: 'check', run, n: '2' } })
  made.push(sb2)
  const pages = await listAll({ query: { metadata: { run } }, limit: 1 })
  eq(pages.map((p) => p.length), [1, 1], 'page sizes')
  const ids = pages.flat().map((s) => s.sandboxId).sort()
  eq(ids, [sb.sandboxId, sb2.sandboxId].sort(), 'ids')
  const only2 = (await listAll({ query: { metadata: { run, n: '2' } } })).flat()
  eq(only2.map((s) => s.sandboxId), [sb2.sandboxId], 'metadata filter')
})

await check('pause: state paused, envd refuses, second pause is false', async () => {
  await sb.files.write('/home/user/keep.txt', 'kept')
  eq(await sb.pause(), true, 'pause')
  eq((await sb.getInfo()).state, 'paused', 'state')
  await rejects(sb.commands.run('true'), SandboxError, 'command while paused')
  eq(await sb.pause(), false, 'pause again')
  const paused = (await listAll({ query: { metadata: { run }, state: ['paused'] } })).flat()
  eq(paused.map((s) => s.sandboxId), [sb.sandboxId], 'listed as paused')
})

await check('Sandbox.connect resumes a paused sandbox; files kept', async () => {
  const again = await Sandbox.connect(sb.sandboxId, { timeoutMs: 60_000 })
  eq(again.sandboxId, sb.sandboxId, 'id')
  eq((await again.getInfo()).state, 'running', 'state')
  eq(await again.files.read('/home/user/keep.txt'), 'kept', 'file kept')
  const r = await again.commands.run('echo back')
  eq(r.stdout, 'back\n', 'command after resume')
  eq(await again.isRunning(), true, 'isRunning')
})

await check('betaPause and connect() on the instance', async () => {
  eq(await sb2.betaPause(), true, 'betaPause')
  eq((await sb2.getInfo()).state, 'paused', 'state')
  await sb2.connect()
  eq((await sb2.getInfo()).state, 'running', 'state after connect')
})

await check('setTimeout moves endAt', async () => {
  await sb.setTimeout(600_000)
  const info = await sb.getInfo()
  const left = info.endAt.getTime() - Date.now()
  truthy(left > 500_000 && left <= 601_000, `endAt in ~600 s (${left} ms)`)
})

await check('kill: true, then false; getInfo is SandboxNotFoundError; list no longer has it',
  async () => {
    eq(await sb.kill(), true, 'kill')
    eq(await sb.kill(), false, 'kill again')
    await rejects(sb.getInfo(), SandboxNotFoundError, 'getInfo')
    eq(await sb.isRunning(), false, 'isRunning after kill')
    eq(await Sandbox.kill(sb2.sandboxId), true, 'Sandbox.kill')
    const left = (await listAll({ query: { metadata: { run } } })).flat()
    eq(left.length, 0, 'sandboxes left')
  })

console.log(`# ${n} checks passed`)
