// Drives sbx's loopback Kubernetes apiserver fake (tests/fakes/k8s.py) with the official
// JavaScript client, @kubernetes/client-node (pinned in package.json).
//   KUBECONFIG=FILE node check.mjs [agents]
// FILE names the fake (https, its CA, a bearer token). With "agents" the agent-sandbox
// groups are checked too (the fake serves them). Prints one line per check ("ok N - ..."),
// exits 1 at the first failure ("not ok N - ...") after deleting what it made.
import * as k8s from '@kubernetes/client-node'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import stream from 'node:stream'

if (!process.env.KUBECONFIG) {
  console.error('check.mjs: KUBECONFIG is not set')
  process.exit(2)
}
const agents = process.argv.includes('agents')
const ns = 'default'
const pod = `js-${process.pid}`
const sandbox = `jsbox-${process.pid}`
const kc = new k8s.KubeConfig()
kc.loadFromFile(process.env.KUBECONFIG)
const core = kc.makeApiClient(k8s.CoreV1Api)
const custom = kc.makeApiClient(k8s.CustomObjectsApi)
const exec = new k8s.Exec(kc)
let n = 0

// an error thrown in a callback of the client (cpToPod's, for one) ends the run cleanly
process.on('uncaughtException', async (err) => {
  console.log(`not ok ${n} - uncaught: ${err && err.stack ? err.stack : err}`)
  await cleanup()
  process.exit(1)
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function cleanup() {
  await core.deleteNamespacedPod({ name: pod, namespace: ns }).catch(() => undefined)
  if (agents) {
    await custom
      .deleteNamespacedCustomObject({
        group: 'agents.x-k8s.io', version: 'v1alpha1', namespace: ns, plural: 'sandboxes',
        name: sandbox,
      })
      .catch(() => undefined)
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

// until(what, fn): fn() every 250 ms until it returns a truthy value (at most 15 s)
async function until(what, fn) {
  for (let i = 0; i < 60; i++) {
    const v = await fn()
    if (v) {
      return v
    }
    await sleep(250)
  }
  throw new Error(`timed out waiting for ${what}`)
}

function sink() {
  const chunks = []
  const w = new stream.Writable({
    write(chunk, _enc, cb) {
      chunks.push(Buffer.from(chunk))
      cb()
    },
  })
  w.text = () => Buffer.concat(chunks).toString()
  return w
}

// run(podName, argv, stdinText?) -> {out, err, status}, once the WebSocket closed
function run(name, argv, stdinText) {
  return new Promise((resolve, reject) => {
    const out = sink()
    const err = sink()
    const stdin = stdinText === undefined ? null : stream.Readable.from([Buffer.from(stdinText)])
    let status
    const timer = setTimeout(() => reject(new Error(`exec ${argv} did not end in 15 s`)), 15000)
    exec
      .exec(ns, name, 'sandbox', argv, out, err, stdin, false, (st) => {
        status = st
      })
      .then((ws) => {
        ws.on('close', () => {
          clearTimeout(timer)
          resolve({ out: out.text(), err: err.text(), status })
        })
        ws.on('error', (e) => {
          clearTimeout(timer)
          reject(e)
        })
      }, (e) => {
        clearTimeout(timer)
        reject(e)
      })
  })
}

const phase = async (name) => {
  const p = await core.readNamespacedPod({ name, namespace: ns }).catch(() => null)
  return p && p.status && p.status.phase
}

await check('create a pod, and it becomes Running', async () => {
  const body = {
    metadata: { name: pod, labels: { app: 'js-check', run: String(process.pid) } },
    spec: {
      containers: [{
        name: 'sandbox', image: 'busybox', command: ['sleep', 'infinity'],
        env: [{ name: 'CHECK', value: 'js' }],
      }],
    },
  }
  const made = await core.createNamespacedPod({ namespace: ns, body })
  eq(made.metadata.name, pod, 'name')
  await until('Running', async () => (await phase(pod)) === 'Running')
  const p = await core.readNamespacedPod({ name: pod, namespace: ns })
  const ready = p.status.conditions.find((c) => c.type === 'Ready')
  eq(ready.status, 'True', 'Ready condition')
})

await check('list pods, by label selector', async () => {
  const all = await core.listNamespacedPod({ namespace: ns })
  if (!all.items.some((p) => p.metadata.name === pod)) {
    throw new Error(`${pod} not listed: ${all.items.map((p) => p.metadata.name)}`)
  }
  const sel = await core.listNamespacedPod({ namespace: ns, labelSelector: `run=${process.pid}` })
  eq(sel.items.map((p) => `${p.metadata.name}/${p.status.phase}`), [`${pod}/Running`], 'selected')
  const none = await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=nothing-here' })
  eq(none.items.length, 0, 'items of a selector matching nothing')
})

await check('exec: separate streams, the exit code in the status', async () => {
  const r = await run(pod, ['sh', '-c', 'echo out; echo err >&2; echo "$CHECK"; exit 3'])
  eq([r.out, r.err], ['out\njs\n', 'err\n'], 'streams')
  eq(r.status.status, 'Failure', 'status')
  eq(r.status.reason, 'NonZeroExitCode', 'reason')
  eq(r.status.details.causes, [{ reason: 'ExitCode', message: '3' }], 'causes')
})

await check('exec: success', async () => {
  const r = await run(pod, ['echo', 'hi'])
  eq([r.out, r.status.status], ['hi\n', 'Success'], 'output and status')
})

await check('exec: stdin, then its end', async () => {
  const r = await run(pod, ['sh', '-c', 'wc -c'], 'abcdef')
  eq([r.out.trim(), r.status.status], ['6', 'Success'], 'wc -c of stdin')
})

await check('Cp.cpToPod writes a file into the pod', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-'))
  fs.writeFileSync(path.join(dir, 'data.txt'), 'jsdata\n')
  // 1.4.0 packs the directory srcPath (tar-fs) and does not wait for the exec to end
  await new k8s.Cp(kc).cpToPod(ns, pod, 'sandbox', dir, '/tmp')
  const r = await until('the copied file', async () => {
    const x = await run(pod, ['cat', '/tmp/data.txt'])
    return x.status.status === 'Success' && x
  }).finally(() => fs.rmSync(dir, { recursive: true, force: true }))
  eq(r.out, 'jsdata\n', 'the file in the pod')
})

await check('401 with a wrong token (the right one works)', async () => {
  const bad = new k8s.KubeConfig()
  bad.loadFromFile(process.env.KUBECONFIG)
  bad.users = bad.users.map((u) => ({ ...u, token: 'wrong-token' }))
  const api = bad.makeApiClient(k8s.CoreV1Api)
  let caught
  try {
    await api.listNamespacedPod({ namespace: ns })
  } catch (e) {
    caught = e
  }
  if (!caught || caught.code !== 401) {
    throw new Error(`wanted an ApiException 401, got ${caught}`)
  }
  // (the generated client keeps no body for a 401: the fake's Status is checked with curl)
  await core.listNamespacedPod({ namespace: ns })
})

await check('404 Status for a missing pod', async () => {
  let caught
  try {
    await core.readNamespacedPod({ name: 'no-such-pod', namespace: ns })
  } catch (e) {
    caught = e
  }
  eq(caught && caught.code, 404, 'code')
  const body = typeof caught.body === 'string' ? JSON.parse(caught.body) : caught.body
  if (!/"reason":"NotFound"|NotFound/.test(JSON.stringify(body) + caught.message)) {
    throw new Error(`no NotFound in ${caught.message}`)
  }
})

if (agents) {
  const sb = { group: 'agents.x-k8s.io', version: 'v1alpha1', namespace: ns, plural: 'sandboxes' }
  const ready = async () => {
    const o = await custom.getNamespacedCustomObject({ ...sb, name: sandbox })
    const c = ((o.status || {}).conditions || []).find((x) => x.type === 'Ready')
    return c && c.status === 'True' && o
  }
  await check('a Sandbox gets its pod and its PVC, and becomes Ready', async () => {
    await custom.createNamespacedCustomObject({
      ...sb,
      body: {
        apiVersion: 'agents.x-k8s.io/v1alpha1', kind: 'Sandbox', metadata: { name: sandbox },
        spec: {
          podTemplate: {
            metadata: { labels: { app: 'js-sandbox' } },
            spec: {
              containers: [{
                name: 'sandbox', image: 'busybox', command: ['sleep', 'infinity'],
                volumeMounts: [{ name: 'work', mountPath: '/work' }],
              }],
            },
          },
          volumeClaimTemplates: [{
            metadata: { name: 'work' },
            spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
          }],
        },
      },
    })
    const o = await until('Ready', ready)
    eq(o.status.replicas, 1, 'status.replicas')
    await until('the pod Running', async () => (await phase(sandbox)) === 'Running')
    const pvc = await core.readNamespacedPersistentVolumeClaim({
      name: `work-${sandbox}`, namespace: ns,
    })
    eq(pvc.status.phase, 'Bound', 'PVC phase')
    const w = await run(sandbox, ['sh', '-c', 'echo kept > /work/f'])
    eq(w.status.status, 'Success', 'writing to the PVC')
  })
  await check('replicas 0: the pod goes, the PVC stays; replicas 1: its files are back', async () => {
    const patch = (v) => custom.patchNamespacedCustomObject({
      ...sb, name: sandbox, body: [{ op: 'replace', path: '/spec/replicas', value: v }],
    })
    await patch(0)
    await until('the pod gone', async () => (await phase(sandbox)) === null)
    await core.readNamespacedPersistentVolumeClaim({ name: `work-${sandbox}`, namespace: ns })
    await patch(1)
    await until('Ready again', ready)
    await until('the pod Running', async () => (await phase(sandbox)) === 'Running')
    const r = await run(sandbox, ['cat', '/work/f'])
    eq(r.out, 'kept\n', 'the file on the PVC')
  })
  await check('deleting the Sandbox deletes its pod and PVC', async () => {
    await custom.deleteNamespacedCustomObject({ ...sb, name: sandbox })
    await until('the pod gone', async () => (await phase(sandbox)) === null)
    // (a PVC stays Terminating while a pod uses it)
    await until('the PVC gone', async () => {
      const pvcs = await core.listNamespacedPersistentVolumeClaim({ namespace: ns })
      return !pvcs.items.some((p) => p.metadata.name === `work-${sandbox}`)
    })
  })
}

await check('delete the pod', async () => {
  await core.deleteNamespacedPod({ name: pod, namespace: ns })
  await until('the pod gone', async () => (await phase(pod)) === null)
})

console.log(`# ${n} checks passed`)
