// What the kafkajs interop tools (driver.js, group_driver.js, group_member.js) have in common, kept
// in one place so that each tool holds only what it tests: "--name value" arguments, the kafkajs
// client settings and logging, failure reasons, and the report drivers' phases, watchdog and exit.
// Their command lines and outputs are the ones tests/interop/README.md documents.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const KAFKAJS_VERSION = require('kafkajs/package.json').version

const text = buffer => (buffer == null ? null : buffer.toString()) // null key/value stays null

// "--name value" pairs over the defaults into { name: value }; every name in `required` must be set.
function parseArgs(argv, defaults, required) {
  const args = { ...defaults }
  for (let n = 0; n < argv.length; n += 2) {
    const name = argv[n]
    if (!name.startsWith('--') || n + 1 >= argv.length) throw new Error(`bad argument ${name}`)
    args[name.slice(2)] = argv[n + 1]
  }
  for (const name of required) {
    if (!args[name]) throw new Error(`--${name} is required`)
  }
  return args
}

// kafkajs logs through console.*; send everything to stderr so stdout stays clean.
const stderrLogCreator = () => ({ namespace, label, log }) => {
  process.stderr.write(`kafkajs ${label} [${namespace}] ${log.message}\n`)
}

// The kafkajs client settings every tool uses; --bootstrap may list several host:port, comma-separated.
const kafkaConfig = (clientId, bootstrap) => ({
  clientId,
  brokers: bootstrap.split(',').map(b => b.trim()).filter(b => b),
  connectionTimeout: 5000,
  requestTimeout: 30000,
  logLevel: logLevel.WARN,
  logCreator: stderrLogCreator,
})

// --client-config FILE (JSON) adds kafkajs's `ssl` and `sasl` options: {"ssl": {"ca", "cert", "key"} (file
// paths, read here), "sasl": {"mechanism", "username", "password"}}; without it the connection is PLAINTEXT.
function securityConfig(file) {
  if (!file) return {}
  const { ssl, sasl } = JSON.parse(fs.readFileSync(file, 'utf8'))
  const read = path => (path ? fs.readFileSync(path) : undefined)
  const tls = ssl && { ca: [read(ssl.ca)], cert: read(ssl.cert), key: read(ssl.key) }
  return { ...(tls && { ssl: tls }), ...(sasl && { sasl }) }
}

const newKafka = (clientId, bootstrap, clientConfig) =>
  new Kafka({ ...kafkaConfig(clientId, bootstrap), ...securityConfig(clientConfig) })

// "Name: message" of an error (or whatever was thrown).
const reasonOf = e => `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`

// A driver's phases ("create", "consume", ...): the one running now, named in failure messages, and
// how long each took, in `timings` (milliseconds by phase name).
class Phases {
  constructor() {
    this.phase = 'start'
    this.timings = {}
    this.phaseStart = Date.now()
  }

  // Close the current phase's timing and name the next one.
  enter(next) {
    const now = Date.now()
    if (this.phase !== 'start') this.timings[this.phase] = now - this.phaseStart
    this.phase = next
    this.phaseStart = now
  }
}

// A driver's top level: run main() under a watchdog that fails with "<tool>: timed out after <limit>
// during <phase>" after watchdogMs; exit 0 once main() resolves, or print the error's stack and one
// line "<tool>: during <phase>: <reason>" on stderr and exit 1.
function runDriver(tool, main, phases, watchdogMs, limit) {
  const watchdog = setTimeout(() => {
    process.stderr.write(`${tool}: timed out after ${limit} during ${phases.phase}\n`)
    process.exit(1)
  }, watchdogMs)

  main().then(
    () => {
      clearTimeout(watchdog)
      process.exit(0)
    },
    e => {
      process.stderr.write(`${e && e.stack ? e.stack : e}\n`)
      process.stderr.write(`${tool}: during ${phases.phase}: ${reasonOf(e).replace(/\n/g, ' ')}\n`)
      process.exit(1)
    },
  )
}

module.exports = {
  KAFKAJS_VERSION, text, parseArgs, stderrLogCreator, securityConfig, newKafka, reasonOf, Phases, runDriver,
}
