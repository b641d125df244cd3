// A kafkajs compression codec for zstd on zstd-codec (Emscripten build of libzstd, no native addon).
// kafkajs' own @kafkajs/zstd needs the cppzst addon, which does not compile against Node 20's headers.
const { ZstdCodec } = require('zstd-codec')

let simple = null
const ready = new Promise(resolve => {
  ZstdCodec.run(zstd => {
    simple = new zstd.Simple()
    resolve()
  })
})

module.exports = () => ({
  async compress(encoder) {
    await ready
    return Buffer.from(simple.compress(encoder.buffer))
  },
  async decompress(buffer) {
    await ready
    return Buffer.from(simple.decompress(buffer))
  },
})
