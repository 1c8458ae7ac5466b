package onnx

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The ONNX messages this package writes, encoded by hand with protowire by
// the field numbers of onnx/onnx.proto (ONNX 1.14). Only the fields the
// export sets are here.

// Field numbers of ModelProto.
const (
	modelIRVersion    = 1
	modelProducerName = 2
	modelProducerVer  = 3
	modelDocString    = 6
	modelGraph        = 7
	modelOpsetImport  = 8
	modelMetadata     = 14
)

// Field numbers of GraphProto, NodeProto, AttributeProto, TensorProto,
// ValueInfoProto, TypeProto (and its Tensor and TensorShapeProto).
const (
	graphNode        = 1
	graphName        = 2
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12

	nodeInput     = 1
	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5

	attrName   = 1
	attrF      = 2
	attrI      = 3
	attrS      = 4
	attrFloats = 7
	attrInts   = 8
	attrType   = 20

	tensorDims     = 1
	tensorDataType = 2
	tensorName     = 8
	tensorRawData  = 9

	valueName = 1
	valueType = 2

	typeTensor     = 1
	tensorElemType = 1
	tensorShape    = 2
	shapeDim       = 1
	dimValue       = 1
	dimParam       = 2

	opsetDomain  = 1
	opsetVersion = 2

	entryKey   = 1
	entryValue = 2
)

// AttributeProto.AttributeType and TensorProto.DataType values.
const (
	attrTypeFloat  = 1
	attrTypeInt    = 2
	attrTypeString = 3
	attrTypeFloats = 6
	attrTypeInts   = 7

	dtFloat = 1
	dtInt64 = 7
)

// msg is an encoded message under construction.
type msg []byte

func (m msg) str(field protowire.Number, s string) msg {
	m = protowire.AppendTag(m, field, protowire.BytesType)
	return protowire.AppendString(m, s)
}

func (m msg) bytes(field protowire.Number, b []byte) msg {
	m = protowire.AppendTag(m, field, protowire.BytesType)
	return protowire.AppendBytes(m, b)
}

func (m msg) sub(field protowire.Number, b msg) msg { return m.bytes(field, b) }

func (m msg) varint(field protowire.Number, v int64) msg {
	m = protowire.AppendTag(m, field, protowire.VarintType)
	return protowire.AppendVarint(m, uint64(v))
}

func (m msg) float(field protowire.Number, f float32) msg {
	m = protowire.AppendTag(m, field, protowire.Fixed32Type)
	return protowire.AppendFixed32(m, math.Float32bits(f))
}

// packedInts appends a packed repeated int64 field.
func (m msg) packedInts(field protowire.Number, v []int64) msg {
	var b []byte
	for _, x := range v {
		b = protowire.AppendVarint(b, uint64(x))
	}
	return m.bytes(field, b)
}

// packedFloats appends a packed repeated float field.
func (m msg) packedFloats(field protowire.Number, v []float32) msg {
	var b []byte
	for _, x := range v {
		b = protowire.AppendFixed32(b, math.Float32bits(x))
	}
	return m.bytes(field, b)
}

// attr is one AttributeProto.
type attr struct {
	name string
	enc  msg
}

func intAttr(name string, v int64) attr {
	return attr{name, msg(nil).str(attrName, name).varint(attrI, v).varint(attrType, attrTypeInt)}
}

func floatAttr(name string, v float32) attr {
	return attr{name, msg(nil).str(attrName, name).float(attrF, v).varint(attrType, attrTypeFloat)}
}

func stringAttr(name, v string) attr {
	return attr{name, msg(nil).str(attrName, name).bytes(attrS, []byte(v)).varint(attrType, attrTypeString)}
}

func intsAttr(name string, v ...int64) attr {
	return attr{name, msg(nil).str(attrName, name).packedInts(attrInts, v).varint(attrType, attrTypeInts)}
}

func floatsAttr(name string, v ...float32) attr {
	return attr{name, msg(nil).str(attrName, name).packedFloats(attrFloats, v).varint(attrType, attrTypeFloats)}
}

// nodeProto encodes a NodeProto; an input "" is an omitted optional input.
func nodeProto(name, op string, in, out []string, attrs []attr) msg {
	var m msg
	for _, s := range in {
		m = m.str(nodeInput, s)
	}
	for _, s := range out {
		m = m.str(nodeOutput, s)
	}
	m = m.str(nodeName, name).str(nodeOpType, op)
	for _, a := range attrs {
		m = m.sub(nodeAttribute, a.enc)
	}
	return m
}

// floatTensor encodes a float32 TensorProto with raw little-endian data.
func floatTensor(name string, dims []int64, data []float32) msg {
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	m := msg(nil).packedInts(tensorDims, dims).varint(tensorDataType, dtFloat).str(tensorName, name)
	return m.bytes(tensorRawData, raw)
}

// int64Tensor encodes an int64 TensorProto; dims nil is a scalar.
func int64Tensor(name string, dims []int64, data []int64) msg {
	raw := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	var m msg
	if len(dims) > 0 {
		m = m.packedInts(tensorDims, dims)
	}
	m = m.varint(tensorDataType, dtInt64).str(tensorName, name)
	return m.bytes(tensorRawData, raw)
}

// valueInfo encodes a float ValueInfoProto whose first axis is the
// symbolic batch and the rest the given extents.
func valueInfo(name string, dims []int64) msg {
	shape := msg(nil).sub(shapeDim, msg(nil).str(dimParam, "batch"))
	for _, d := range dims {
		shape = shape.sub(shapeDim, msg(nil).varint(dimValue, d))
	}
	tt := msg(nil).varint(tensorElemType, dtFloat).sub(tensorShape, shape)
	return msg(nil).str(valueName, name).sub(valueType, msg(nil).sub(typeTensor, tt))
}
