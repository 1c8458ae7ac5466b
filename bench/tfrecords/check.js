// Reads a TFRecord file (a TensorBoard event file) with the CRC-32C, the
// masking and the int64 reading of @roboflow/tfrecords, a TFRecord
// implementation written apart from pipe's, and prints as JSON how many
// records verified, their lengths, and why it stopped early ("" at a
// clean end). Usage: node check.js FILE
"use strict";
const fs = require("fs");
const { crc32c, maskCrc, readInt64 } = require("@roboflow/tfrecords/src/tensorFlowHelpers");

const buf = fs.readFileSync(process.argv[2]);
const lengths = [];
let pos = 0;
let stopped = "";
while (pos < buf.length) {
  if (buf.length - pos < 12) {
    stopped = "header cut short";
    break;
  }
  const lenBytes = buf.slice(pos, pos + 8);
  if (maskCrc(crc32c(lenBytes)) !== buf.readUInt32LE(pos + 8)) {
    stopped = "length CRC";
    break;
  }
  const n = readInt64(lenBytes);
  if (buf.length - pos - 12 < n + 4) {
    stopped = "data cut short";
    break;
  }
  const data = buf.slice(pos + 12, pos + 12 + n);
  if (maskCrc(crc32c(data)) !== buf.readUInt32LE(pos + 12 + n)) {
    stopped = "data CRC";
    break;
  }
  lengths.push(n);
  pos += 12 + n + 4;
}
process.stdout.write(JSON.stringify({ records: lengths.length, lengths, stopped }) + "\n");
