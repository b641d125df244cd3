#!/usr/bin/env node
// One kafkajs consumer-group member in its own process, for rebalance and crash tests
// (contract: tests/interop/README.md, "Group member processes"; same as tests/interop/group_member.py).
//
//   node group_member.js --bootstrap 127.0.0.1:9092 --topic T --group G [--session-ms 6000]
//
// Subscribes (kafkajs's default RoundRobinAssigner, heartbeat every 500 ms, autoCommit off,
// fromBeginning = earliest reset) and consumes until stdin closes or SIGTERM arrives, then leaves the
// group with consumer.disconnect() (LeaveGroup) and exits 0. kafkajs has no rebalance listener: after
// every GROUP_JOIN instrumentation event (a completed JoinGroup + SyncGroup) it prints one JSON line
// with the partitions it now owns, {"assigned": [p, ...]}; problems print {"error": "..."}. A test
// kills it with SIGKILL to simulate a crash.
'use strict'

const { parseArgs, newKafka, reasonOf } = require('./common')

const HEARTBEAT_MS = 500

function memberArgs(argv) {
  const args = parseArgs(argv, { 'session-ms': '6000' }, ['bootstrap', 'topic', 'group'])
  args['session-ms'] = Number(args['session-ms'])
  if (!Number.isInteger(args['session-ms']) || args['session-ms'] < 1) {
    throw new Error(`bad --session-ms ${args['session-ms']}`)
  }
  return args
}

const emit = line => process.stdout.write(`${JSON.stringify(line)}\n`) // one write per line: no interleaving

async function main() {
  const args = memberArgs(process.argv.slice(2))
  const { bootstrap, topic, group } = args

  const kafka = newKafka('group-member-kafkajs', bootstrap) // logs to stderr: stdout carries only the JSON lines
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: args['session-ms'],
    heartbeatInterval: HEARTBEAT_MS,
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: 200, // the fetch loop is where kafkajs heartbeats and notices a rebalance
  })

  // Settled by stdin EOF or SIGTERM; acted on once the consumer is running, so an early stop still
  // leaves a group it has joined.
  const stopRequested = new Promise(resolve => {
    process.on('SIGTERM', resolve)
    process.stdin.on('end', resolve)
    process.stdin.on('error', resolve)
    process.stdin.resume() // read (and ignore) stdin so 'end' fires when it closes
  })

  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const partitions = (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
    emit({ assigned: partitions })
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    const { error, restart } = payload
    emit({ error: `consumer crashed (${restart ? 'restarting' : 'not restarting'}): ${error.name}: ${error.message}` })
  })

  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({ autoCommit: false, eachMessage: async () => {} })
  await stopRequested
  await consumer.disconnect() // Runner.stop() -> ConsumerGroup.leave() -> LeaveGroup, waits for the answer
}

main().then(
  () => process.exit(0),
  e => {
    emit({ error: reasonOf(e) })
    process.exit(1)
  },
)
