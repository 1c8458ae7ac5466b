// time.js times an ONNX model in onnxruntime-node beside pipe's own
// inference (bench/cmd/infer drives it). It loads MODEL on the CPU with
// THREADS intra-op threads and IN (little-endian float32, shape DIMS such
// as 64,1,28,28) as its input; then, for each line "BATCH SECONDS" on
// stdin, it runs the first BATCH samples of IN again and again for about
// SECONDS and prints one JSON line: {"batch", "runs", "ns"} (the wall
// clock over those runs). An empty line or the end of stdin stops it.
//
//   node time.js MODEL.onnx THREADS IN DIMS
'use strict';
const fs = require('fs');
const readline = require('readline');
const ort = require('onnxruntime-node');

async function main(argv) {
  if (argv.length !== 4) {
    throw new Error('usage: node time.js MODEL.onnx THREADS IN DIMS');
  }
  const threads = Number(argv[1]);
  const session = await ort.InferenceSession.create(argv[0], {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    logSeverityLevel: 3, // errors only: not the notes on initializers it drops
  });
  const input = session.inputNames[0];
  const buf = fs.readFileSync(argv[2]);
  const all = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
  const dims = argv[3].split(',').map(Number);
  const per = all.length / dims[0];
  const feeds = new Map();
  const feed = (batch) => {
    if (!feeds.has(batch)) {
      if (batch < 1 || batch > dims[0]) throw new Error(`batch ${batch}: IN holds ${dims[0]} samples`);
      const t = new ort.Tensor('float32', all.subarray(0, batch * per), [batch, ...dims.slice(1)]);
      feeds.set(batch, { [input]: t });
    }
    return feeds.get(batch);
  };
  console.log(JSON.stringify({ ready: true, threads }));
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (line.trim() === '') break;
    const [b, s] = line.trim().split(/\s+/).map(Number);
    const f = feed(b);
    const budget = BigInt(Math.round(s * 1e9));
    let runs = 0;
    const t0 = process.hrtime.bigint();
    let t = t0;
    while (runs === 0 || t - t0 < budget) {
      await session.run(f);
      runs++;
      t = process.hrtime.bigint();
    }
    console.log(JSON.stringify({ batch: b, runs, ns: Number(t - t0) }));
  }
  rl.close();
}

main(process.argv.slice(2)).catch((err) => {
  console.error(String(err && err.message ? err.message : err));
  process.exit(1);
});
