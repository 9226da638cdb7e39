// Drives sbx's loopback Daytona fake (tests/fakes/daytona.py) with the official TypeScript SDK,
// the way a user of Daytona would: create (the SDK polls until started), run commands, a session,
// upload and download a file, list a directory, stop and start, a preview link, list, delete.
// The SDK reads DAYTONA_* from the environment, then from ./.env.local and ./.env.
// Usage: DAYTONA_API_URL=http://127.0.0.1:PORT DAYTONA_API_KEY=KEY node check.mjs
// Prints one line per check ("ok N - what"), and "not ok N - what: why" then exits 1 at the
// first failure. Each check is bounded (CHECK_TIMEOUT seconds, default 30).
import { Daytona, DaytonaError, DaytonaNotFoundError } from '@daytonaio/sdk'

const apiUrl = process.env.DAYTONA_API_URL
const apiKey = process.env.DAYTONA_API_KEY
if (!apiUrl || !apiKey) {
  console.error('check.mjs: set DAYTONA_API_URL and DAYTONA_API_KEY')
  process.exit(2)
}
const limit = Number(process.env.CHECK_TIMEOUT || 30) * 1000

let n = 0
const made = []
let daytona

async function cleanup() {
  for (const sb of made) {
    try {
      await bounded(sb.delete(10), 'cleanup')
    } catch {
      // already gone, or the fake is down: the test removes what is left
    }
  }
}

function bounded(promise, what) {
  let timer
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${limit / 1000} s`)), limit)
  })
  return Promise.race([promise, t]).finally(() => clearTimeout(timer))
}

async function check(what, fn) {
  n += 1
  try {
    await bounded(fn(), what)
  } catch (e) {
    const status = e instanceof DaytonaError && e.statusCode ? ` (HTTP ${e.statusCode})` : ''
    console.log(`not ok ${n} - ${what}: ${e && e.message ? e.message : e}${status}`)
    await cleanup()
    process.exit(1)
  }
  console.log(`ok ${n} - ${what}`)
}

function expect(cond, msg) {
  if (!cond) throw new Error(msg)
}

function same(got, want, what) {
  const g = JSON.stringify(got)
  const w = JSON.stringify(want)
  expect(g === w, `${what}: got ${g}, wanted ${w}`)
}

// rejects: fn fails with a DaytonaError of HTTP status `status` (and class `cls`, if given)
async function rejects(fn, status, cls) {
  let err
  try {
    await fn()
  } catch (e) {
    err = e
  }
  expect(err !== undefined, `succeeded, wanted HTTP ${status}`)
  expect(err instanceof DaytonaError, `threw ${err}, not a DaytonaError`)
  expect(err.statusCode === status, `HTTP ${err.statusCode} (${err.message}), wanted ${status}`)
  if (cls) expect(err instanceof cls, `${err.name}, wanted ${cls.name}`)
  return err
}

let sb, other

await check('client made from DAYTONA_API_URL and DAYTONA_API_KEY', async () => {
  daytona = new Daytona()
})

await check('bad key: create fails with 401', async () => {
  const bad = new Daytona({ apiKey: 'dtn_wrong', apiUrl })
  await rejects(() => bad.create({ labels: { sbxcheck: 'bad' } }, { timeout: 10 }), 401)
})

await check('create: the SDK polls until the sandbox is started', async () => {
  sb = await daytona.create(
    { envVars: { SBX_CHECK: 'from-create' }, labels: { sbxcheck: 'main' } },
    { timeout: 30 },
  )
  made.push(sb)
  same(sb.state, 'started', 'state')
  expect(typeof sb.id === 'string' && sb.id.length > 0, 'no id')
  same(sb.labels.sbxcheck, 'main', 'label')
  same(sb.labels['code-toolbox-language'], 'python', 'language label the SDK adds')
  same(sb.env.SBX_CHECK, 'from-create', 'env in the record')
})

await check('get by id and by name', async () => {
  const byId = await daytona.get(sb.id)
  same(byId.id, sb.id, 'id')
  same(byId.state, 'started', 'state')
  const byName = await daytona.get(sb.name)
  same(byName.id, sb.id, 'id by name')
})

await check('executeCommand: output and exit code 0', async () => {
  const r = await sb.process.executeCommand('echo hello; echo world')
  same(r.exitCode, 0, 'exit code')
  same(r.result, 'hello\nworld\n', 'result')
})

await check('executeCommand: a non-zero exit code, stderr in the combined result', async () => {
  const r = await sb.process.executeCommand('echo out; echo err >&2; exit 3')
  same(r.exitCode, 3, 'exit code')
  expect(r.result.includes('out\n') && r.result.includes('err\n'), `result ${JSON.stringify(r.result)}`)
})

await check('executeCommand: cwd and env, and the env given at create', async () => {
  const r = await sb.process.executeCommand('pwd; echo "$CHECK_VAR $SBX_CHECK"', '/tmp', { CHECK_VAR: 'v1' })
  same(r.exitCode, 0, 'exit code')
  same(r.result, '/tmp\nv1 from-create\n', 'result')
})

await check('executeCommand: a timeout ends the command with 408', async () => {
  await rejects(() => sb.process.executeCommand('sleep 20', undefined, undefined, 1), 408)
})

const sid = 'sbx-check-session'
await check('session: create, then a sync exec keeps stdout and stderr apart', async () => {
  await sb.process.createSession(sid)
  // a subshell: the command runs in the session's shell itself, where `exit` would end it
  const r = await sb.process.executeSessionCommand(sid, { command: '(echo to-out; echo to-err >&2; exit 4)' })
  same(r.exitCode, 4, 'exit code')
  same(r.stdout, 'to-out\n', 'stdout')
  same(r.stderr, 'to-err\n', 'stderr')
  expect(typeof r.cmdId === 'string' && r.cmdId.length > 0, 'no cmdId')
  const c = await sb.process.getSessionCommand(sid, r.cmdId)
  same(c.exitCode, 4, 'exit code from the command record')
})

await check('session: an async exec, polled to its end, then its logs', async () => {
  const r = await sb.process.executeSessionCommand(sid, {
    command: 'sleep 0.3; echo late; printf late-err >&2; (exit 5)',
    runAsync: true,
  })
  expect(typeof r.cmdId === 'string' && r.cmdId.length > 0, 'no cmdId')
  let c
  for (let i = 0; i < 100; i++) {
    c = await sb.process.getSessionCommand(sid, r.cmdId)
    if (c.exitCode !== undefined && c.exitCode !== null) break
    await new Promise((res) => setTimeout(res, 100))
  }
  same(c.exitCode, 5, 'exit code')
  const logs = await sb.process.getSessionCommandLogs(sid, r.cmdId)
  same(logs.stdout, 'late\n', 'stdout')
  same(logs.stderr, 'late-err\n', 'stderr (a last line gets its newline, as the daemon logs it)')
})

await check('session: cd and variables carry over; exit ends the session', async () => {
  await sb.process.executeSessionCommand(sid, { command: 'cd /tmp && SBX_SESSION_VAR=kept' })
  const r = await sb.process.executeSessionCommand(sid, { command: 'echo "$(pwd) $SBX_SESSION_VAR"' })
  same(r.stdout, '/tmp kept\n', 'stdout')
  same(r.exitCode, 0, 'exit code')
  await rejects(() => sb.process.executeSessionCommand(sid, { command: 'exit 7' }), 400)
  await sb.process.deleteSession(sid)
  await rejects(() => sb.process.getSession(sid), 404)
})

const payload = Buffer.from(Array.from({ length: 70000 }, (_, i) => (i * 7 + (i >> 8)) & 0xff))
await check('uploadFile then downloadFile: the same bytes (parent directories made)', async () => {
  await sb.fs.uploadFile(payload, '/tmp/sbx-check/sub/data.bin')
  await sb.fs.uploadFile(Buffer.from('small text\n'), '/tmp/sbx-check/note.txt')
  const got = await sb.fs.downloadFile('/tmp/sbx-check/sub/data.bin')
  expect(Buffer.isBuffer(got), 'not a Buffer')
  expect(got.equals(payload), `downloaded ${got.length} bytes that differ from the ${payload.length} sent`)
  const r = await sb.process.executeCommand('cat /tmp/sbx-check/note.txt; wc -c < /tmp/sbx-check/sub/data.bin')
  same(r.result, 'small text\n70000\n', 'seen from inside')
})

await check('downloadFile of a missing file fails', async () => {
  let err
  try {
    await sb.fs.downloadFile('/tmp/sbx-check/missing')
  } catch (e) {
    err = e
  }
  expect(err instanceof DaytonaError, `got ${err}, wanted a DaytonaError`)
})

await check('listFiles and getFileDetails', async () => {
  const list = await sb.fs.listFiles('/tmp/sbx-check')
  const names = list.map((f) => f.name).sort()
  same(names, ['note.txt', 'sub'], 'names')
  const sub = list.find((f) => f.name === 'sub')
  same(sub.isDir, true, 'sub is a directory')
  const note = list.find((f) => f.name === 'note.txt')
  same(note.size, 11, 'size')
  same(note.isDir, false, 'note.txt is a file')
  const info = await sb.fs.getFileDetails('/tmp/sbx-check/sub/data.bin')
  same(info.size, 70000, 'info size')
})

await check('createFolder and deleteFile', async () => {
  await sb.fs.createFolder('/tmp/sbx-check/made', '755')
  const r1 = await sb.process.executeCommand('test -d /tmp/sbx-check/made && echo yes')
  same(r1.result, 'yes\n', 'folder made')
  await sb.fs.deleteFile('/tmp/sbx-check/note.txt')
  const r2 = await sb.process.executeCommand('test -e /tmp/sbx-check/note.txt; echo $?')
  same(r2.result, '1\n', 'file deleted')
})

await check('pause of a container sandbox fails with 422', async () => {
  await rejects(() => sb.pause(10), 422)
})

await check('stop: the state is stopped, and the toolbox refuses', async () => {
  await sb.stop(30)
  same(sb.state, 'stopped', 'state after stop')
  const again = await daytona.get(sb.id)
  same(again.state, 'stopped', 'state from get')
  let err
  try {
    await sb.process.executeCommand('true')
  } catch (e) {
    err = e
  }
  expect(err instanceof DaytonaError && err.statusCode >= 400, `toolbox on a stopped sandbox: ${err}`)
})

await check('start: started again, the files kept', async () => {
  await sb.start(30)
  same(sb.state, 'started', 'state after start')
  const got = await sb.fs.downloadFile('/tmp/sbx-check/sub/data.bin')
  expect(got.equals(payload), 'the file changed across stop and start')
  const r = await sb.process.executeCommand('echo back')
  same(r.result, 'back\n', 'result')
})

await check('getPreviewLink', async () => {
  const p = await sb.getPreviewLink(8080)
  expect(/^https:\/\/8080-/.test(p.url) && p.url.includes(sb.id), `url ${p.url}`)
  expect(typeof p.token === 'string' && p.token.length > 0, 'no token')
})

await check('list pages through every sandbox (limit 1, labels filter)', async () => {
  other = await daytona.create({ labels: { sbxcheck: 'other' } }, { timeout: 30 })
  made.push(other)
  const seen = []
  for await (const s of daytona.list({ limit: 1 })) seen.push(s.id)
  expect(seen.includes(sb.id) && seen.includes(other.id), `listed ${JSON.stringify(seen)}`)
  same(new Set(seen).size, seen.length, 'each sandbox once')
  const mine = []
  for await (const s of daytona.list({ labels: { sbxcheck: 'other' } })) mine.push(s.id)
  same(mine, [other.id], 'label filter')
})

await check('an ephemeral sandbox is deleted once stopped', async () => {
  const eph = await daytona.create({ ephemeral: true, labels: { sbxcheck: 'ephemeral' } }, { timeout: 30 })
  made.push(eph)
  same(eph.autoDeleteInterval, 0, 'autoDeleteInterval')
  await eph.stop(30)
  same(eph.state, 'destroyed', 'state after stop')
  await rejects(() => daytona.get(eph.id), 404, DaytonaNotFoundError)
  made.pop()
})

await check('delete: gone afterwards (404)', async () => {
  await sb.delete(30)
  await other.delete(30)
  made.length = 0
  await rejects(() => daytona.get(sb.id), 404, DaytonaNotFoundError)
  await rejects(() => daytona.get(other.id), 404, DaytonaNotFoundError)
})

console.log(`# check.mjs: ${n} checks passed`)
