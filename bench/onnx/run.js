// run.js runs an ONNX model through onnxruntime-node, the check of pipe's
// ONNX export (export/onnx): for each triple of arguments IN DIMS OUT it
// reads IN (little-endian float32, shape DIMS such as 4,1,28,28) as the
// model's only input, runs it, writes the model's first output to OUT as
// float32, and prints the output's dims as a JSON line.
//
//   node run.js MODEL.onnx IN DIMS OUT [IN DIMS OUT]...
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main(argv) {
  if (argv.length < 4 || (argv.length - 1) % 3 !== 0) {
    throw new Error('usage: node run.js MODEL.onnx IN DIMS OUT [IN DIMS OUT]...');
  }
  const session = await ort.InferenceSession.create(argv[0], {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: 1,
  });
  const input = session.inputNames[0];
  const output = session.outputNames[0];
  for (let i = 1; i < argv.length; i += 3) {
    const buf = fs.readFileSync(argv[i]);
    const dims = argv[i + 1].split(',').map(Number);
    const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    const res = await session.run({ [input]: new ort.Tensor('float32', data, dims) });
    const y = res[output];
    fs.writeFileSync(argv[i + 2], Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
    console.log(JSON.stringify({ input, output, dims: y.dims }));
  }
}

main(process.argv.slice(2)).catch((err) => {
  console.error(String(err && err.message ? err.message : err));
  process.exit(1);
});
