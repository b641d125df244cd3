#!/usr/bin/env node
// kafkajs interop driver for barnabas (see tests/interop/common.py for the contract).
//
//   node driver.js --bootstrap 127.0.0.1:9092 --topic T --mode plain|gzip|snappy|lz4|zstd|idempotent \
//       --count 10000 --partitions 3 --out report.json [--timeout-ms 100000] [--client-config FILE]
//
// Admin (createTopics / fetchTopicOffsets / deleteTopics) and produce use kafkajs's public API.
// kafkajs has no assign() consumer, so the read path drives kafkajs's own protocol layer: a
// Cluster (metadata, leader lookup, connection pool) and Broker.fetch(), i.e. kafkajs's real Fetch
// request encoding and RecordBatch decoding (including decompression), with the Batch class its
// consumer uses to drop records below the fetch offset and control records.
// Exit 0 with the JSON report written to --out; exit 1 with one line "interop-driver: <reason>"
// on stderr on failure ("interop-driver: unsupported: ..." when a codec package is missing).
'use strict'

const fs = require('fs')
const { CompressionTypes, CompressionCodecs, Partitioners, logLevel } = require('kafkajs')
const Cluster = require('kafkajs/src/cluster')
const Batch = require('kafkajs/src/consumer/batch')
const { createLogger } = require('kafkajs/src/loggers')
const ISOLATION_LEVEL = require('kafkajs/src/protocol/isolationLevel')
const defaultSocketFactory = require('kafkajs/src/network/socketFactory')
const {
  KAFKAJS_VERSION, text, parseArgs, stderrLogCreator, securityConfig, newKafka, Phases, runDriver,
} = require('./common')

const VALUE_SIZE = 100
const PAD_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789'
const PRODUCE_CHUNK = 500
const MAX_ERRORS = 20

const keyFor = i => `key-${i}`
const valueFor = i => {
  const prefix = `value-${i}-`
  let pad = ''
  for (let j = 0; j < VALUE_SIZE - prefix.length; j++) pad += PAD_ALPHABET[(i + j) % PAD_ALPHABET.length]
  return prefix + pad
}

class Unsupported extends Error {}

const phases = new Phases() // the current one is named in failure messages

function driverArgs(argv) {
  const defaults = { count: 10000, partitions: 3, 'timeout-ms': 100000 }
  const args = parseArgs(argv, defaults, ['bootstrap', 'topic', 'mode', 'out'])
  args.count = Number(args.count)
  args.partitions = Number(args.partitions)
  args['timeout-ms'] = Number(args['timeout-ms'])
  return args
}

// Register the codec a mode needs; return the kafkajs compression type.
function compressionFor(mode) {
  switch (mode) {
    case 'plain':
    case 'idempotent':
      return CompressionTypes.None
    case 'gzip':
      return CompressionTypes.GZIP // built into kafkajs
    case 'snappy':
      CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
      return CompressionTypes.Snappy
    case 'lz4': {
      const LZ4Codec = require('kafkajs-lz4')
      CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
      return CompressionTypes.LZ4
    }
    case 'zstd':
      CompressionCodecs[CompressionTypes.ZSTD] = require('./zstd_codec')
      return CompressionTypes.ZSTD
    default:
      throw new Error(`unknown mode ${mode}`)
  }
}

async function main() {
  const args = driverArgs(process.argv.slice(2))
  const { bootstrap, topic, mode, count, partitions } = args
  const clientId = `interop-kafkajs-${mode}`
  const compression = compressionFor(mode)
  const idempotent = mode === 'idempotent'
  const errors = []
  let errorCount = 0
  const addError = text => {
    errorCount += 1
    if (errors.length < MAX_ERRORS) errors.push(text)
  }
  const timings = phases.timings
  const report = {
    client: 'kafkajs', client_version: `kafkajs ${KAFKAJS_VERSION}`, mode, produced: 0, records: [],
    earliest: {}, latest: {}, errors, timings_ms: timings,
  }
  const started = Date.now()
  const deadline = started + args['timeout-ms']

  const kafka = newKafka(clientId, bootstrap, args['client-config'])
  const admin = kafka.admin()
  await admin.connect()

  phases.enter('create')

  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 30000,
  })
  if (!created) throw new Error(`create topic: ${topic} already exists`)

  phases.enter('produce')

  const producer = kafka.producer({
    idempotent,
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner, // murmur2, Java-compatible
  })
  await producer.connect()
  // Sequential chunks keep per-partition order without relying on in-flight ordering.
  for (let base = 0; base < count; base += PRODUCE_CHUNK) {
    if (Date.now() > deadline) throw new Error('timed out')
    const messages = []
    for (let i = base; i < Math.min(base + PRODUCE_CHUNK, count); i++) {
      messages.push({ key: keyFor(i), value: valueFor(i) })
    }
    try {
      const results = await producer.send({ topic, messages, acks: -1, compression })
      for (const r of results) {
        if (r.errorCode !== 0) addError(`produce p${r.partition}: error code ${r.errorCode}`)
      }
      report.produced += messages.length
    } catch (e) {
      addError(`produce of keys ${base}..${base + messages.length - 1}: ${e.name}: ${e.message}`)
    }
  }
  await producer.disconnect()
  if (report.produced < count) {
    throw new Error(`only ${report.produced} of ${count} messages acknowledged; first error: ${errors[0]}`)
  }

  phases.enter('consume')

  // ---- read path: kafkajs Cluster + Broker.fetch(), assign-style, from offset 0 of every partition
  const cluster = new Cluster({
    logger: createLogger({ level: logLevel.WARN, logCreator: stderrLogCreator }),
    socketFactory: defaultSocketFactory(),
    brokers: bootstrap.split(',').map(b => b.trim()).filter(b => b),
    clientId,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    enforceRequestTimeout: true,
    metadataMaxAge: 300000,
    retry: { retries: 5 },
    allowAutoTopicCreation: false,
    isolationLevel: ISOLATION_LEVEL.READ_COMMITTED, // what kafkajs's consumer uses by default
    ...securityConfig(args['client-config']),
  })
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  await cluster.refreshMetadata()
  const partitionIds = cluster.findTopicPartitionMetadata(topic).map(m => m.partitionId)
  if (partitionIds.length !== partitions) {
    throw new Error(`metadata lists ${partitionIds.length} partitions for ${topic}, expected ${partitions}`)
  }
  const leaders = cluster.findLeaderForPartitions(topic, partitionIds) // { nodeId: [partition, ...] }
  const nextOffset = new Map(partitionIds.map(p => [p, 0]))
  while (report.records.length < count) {
    if (Date.now() > deadline) {
      throw new Error(`timed out (${report.records.length} of ${count} records)`)
    }
    for (const [nodeId, leaderPartitions] of Object.entries(leaders)) {
      const broker = await cluster.findBroker({ nodeId: Number(nodeId) })
      const { responses } = await broker.fetch({
        maxWaitTime: 500,
        minBytes: 1,
        maxBytes: 10485760,
        isolationLevel: cluster.isolationLevel,
        topics: [{
          topic,
          partitions: leaderPartitions.map(partition => ({
            partition,
            fetchOffset: String(nextOffset.get(partition)),
            maxBytes: 1048576,
          })),
        }],
      })
      for (const { topicName, partitions: partitionData } of responses) {
        for (const data of partitionData) {
          const batch = new Batch(topicName, String(nextOffset.get(data.partition)), data)
          for (const m of batch.messages) {
            report.records.push([data.partition, Number(m.offset), text(m.key), text(m.value)])
          }
          if (!batch.isEmptyIncludingFiltered()) {
            nextOffset.set(data.partition, Number(batch.lastOffset()) + 1)
          }
        }
      }
    }
  }
  await cluster.disconnect()

  phases.enter('list_offsets')

  for (const { partition, low, high } of await admin.fetchTopicOffsets(topic)) {
    report.earliest[String(partition)] = Number(low)
    report.latest[String(partition)] = Number(high)
  }

  phases.enter('delete')

  try {
    await admin.deleteTopics({ topics: [topic], timeout: 30000 })
  } catch (e) {
    addError(`delete topic: ${e.name}: ${e.message}`)
  }
  phases.enter('close')
  await admin.disconnect()
  timings.total = Date.now() - started
  if (errorCount > errors.length) errors.push(`${errorCount} errors in all`)
  fs.writeFileSync(args.out, JSON.stringify(report))
}

const timeoutMs = (() => {
  const n = process.argv.indexOf('--timeout-ms')
  return n >= 0 ? Number(process.argv[n + 1]) : 100000
})()
// A missing codec package is "unsupported", not a failure during a phase.
const mainOrUnsupported = () => main().catch(e => {
  if (e instanceof Unsupported) {
    process.stderr.write(`interop-driver: unsupported: ${e.message}\n`)
    process.exit(1)
  }
  throw e
})
runDriver('interop-driver', mainOrUnsupported, phases, timeoutMs + 5000, `${timeoutMs} ms`)
