#!/usr/bin/env node
// kafkajs consumer-GROUP driver for barnabas (contract: tests/interop/README.md, "Consumer-group drivers").
//
//   node group_driver.js --bootstrap 127.0.0.1:9092 --topic T --group G --count N --out report.json \
//       [--timeout-s 60] [--client-config FILE]
//
// Joins group G with kafkajs's real consumer (subscribe(), fromBeginning = earliest when the group
// has no committed offset, autoCommit off), processes exactly N records (eachMessage ignores any
// record after the N-th, whose offsets are therefore never committed), commits
// "last processed offset + 1" per partition with consumer.commitOffsets(), leaves the group with
// consumer.disconnect() (LeaveGroup), reads the group's offsets back with admin.fetchOffsets()
// and writes
//   {"records": [[partition, offset, key, value], ...], "committed": {"<p>": offset},
//    "errors": [...], "client_version": "kafkajs 2.2.4", "joins": [...], "timings_ms": {...}}
// Exit 0 with the report in --out; exit 1 with one stderr line "group-driver: <reason>" on failure.
'use strict'

const fs = require('fs')
const { KAFKAJS_VERSION, text, parseArgs, newKafka, Phases, runDriver } = require('./common')

const phases = new Phases() // the current one is named in failure messages

function driverArgs(argv) {
  const args = parseArgs(argv, { 'timeout-s': 60 }, ['bootstrap', 'topic', 'group', 'count', 'out'])
  args.count = Number(args.count)
  args['timeout-s'] = Number(args['timeout-s'])
  if (!Number.isInteger(args.count) || args.count < 1) throw new Error(`bad --count ${args.count}`)
  if (!(args['timeout-s'] > 0)) throw new Error(`bad --timeout-s ${args['timeout-s']}`)
  return args
}

async function main() {
  const args = driverArgs(process.argv.slice(2))
  const { bootstrap, topic, group, count } = args
  const errors = []
  // kafkajs restarts a consumer that hit a retriable error (its own retries exhausted); the test decides
  // whether that may happen (a coordinator failing over) or is a failure.
  const restarts = []
  const timings = phases.timings
  const joins = []
  const records = []
  const committed = {}
  const report = {
    client: 'kafkajs', client_version: `kafkajs ${KAFKAJS_VERSION}`, group, records, committed, errors, restarts, joins,
    timings_ms: timings,
  }
  const started = Date.now()
  const deadline = started + args['timeout-s'] * 1000

  const kafka = newKafka('group-driver-kafkajs', bootstrap, args['client-config'])
  const consumer = kafka.consumer({
    groupId: group,
    heartbeatInterval: 500, // default 3000; sessionTimeout (30000) and rebalanceTimeout (60000) stay default
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: 500,
  })

  // Settled once N records are processed, or rejected when the consumer crashes for good.
  let settle
  const done = new Promise((resolve, reject) => {
    settle = { resolve, reject }
  })
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    joins.push({
      member_id: payload.memberId,
      leader: payload.isLeader,
      protocol: payload.groupProtocol,
      assignment: payload.memberAssignment,
    })
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    const { error, restart } = payload
    const what = `${error.name}${error.type ? ` ${error.type}` : ''}: ${error.message}`
    if (restart) {
      restarts.push(what)
      return
    }
    errors.push(`consumer crashed (not restarting): ${what}`)
    settle.reject(error)
  })

  phases.enter('join')
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })

  const nextOffset = new Map() // partition -> offset of the last processed record + 1
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic: recordTopic, partition, message }) => {
      if (records.length >= count) return // past the N-th record: not processed, never committed
      if (records.length === 0) phases.enter('consume')
      if (recordTopic !== topic) {
        errors.push(`record from unexpected topic ${recordTopic} p${partition}@${message.offset}`)
        return
      }
      const offset = Number(message.offset)
      records.push([partition, offset, text(message.key), text(message.value)])
      nextOffset.set(partition, offset + 1)
      if (records.length === count) settle.resolve()
    },
  })

  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out during ${phases.phase} (${records.length} of ${count} records)`)),
      Math.max(0, deadline - Date.now()),
    )
  })
  try {
    await Promise.race([done, timeout])
  } catch (e) {
    // Leave the group (best effort, bounded) so the next member need not wait out our session.
    await Promise.race([consumer.disconnect().catch(() => {}), new Promise(resolve => setTimeout(resolve, 5000))])
    throw e
  } finally {
    clearTimeout(timer)
  }

  phases.enter('commit')
  consumer.pause([{ topic }]) // stop fetching; nothing after the N-th record is processed anyway
  const offsets = [...nextOffset.entries()].sort((a, b) => a[0] - b[0])
  await consumer.commitOffsets(offsets.map(([partition, offset]) => ({ topic, partition, offset: String(offset) })))
  for (const [partition, offset] of offsets) committed[String(partition)] = offset

  phases.enter('leave')
  await consumer.disconnect() // Runner.stop() -> ConsumerGroup.leave() -> LeaveGroup

  // kafkajs's commitOffsets returns quietly when the runner has stopped; make "committed" honest.
  phases.enter('verify')
  const admin = kafka.admin()
  await admin.connect()
  try {
    const [fetched] = await admin.fetchOffsets({ groupId: group, topics: [topic] })
    const visible = {}
    for (const { partition, offset } of fetched.partitions) {
      if (Number(offset) >= 0) visible[String(partition)] = Number(offset)
    }
    for (const [p, offset] of Object.entries(committed)) {
      if (visible[p] !== offset) errors.push(`committed p${p}=${offset} but OffsetFetch returns ${visible[p]}`)
    }
  } finally {
    await admin.disconnect()
  }
  phases.enter('end')
  timings.total = Date.now() - started
  fs.writeFileSync(args.out, JSON.stringify(report))
}

const timeoutS = (() => {
  const n = process.argv.indexOf('--timeout-s')
  const value = n >= 0 ? Number(process.argv[n + 1]) : 60
  return value > 0 ? value : 60
})()
runDriver('group-driver', main, phases, (timeoutS + 5) * 1000, `${timeoutS + 5} s`)
