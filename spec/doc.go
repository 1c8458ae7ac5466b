// Package spec holds the typed specs a checked program is decoded into:
// one struct per source kind (IDX, CSV, Images, GeoTIFF, Synthetic,
// Volume) under Source, the settings the planner and a run read from the
// top level and the train, evaluate, predict, serve and device blocks
// (Auto for a setting that may be written auto), a device's peak rates
// (Peaks), and the names of the engines linked in (Engines), which the
// engines register. It is a leaf: it imports only diag, so that stdlib,
// the planner and its plan, the data readers and the run loop can all take
// these types, and the last two without importing the language (HCL's
// gohcl fills tagged structs the same way; the run loop never sees the
// body). The types marshal to JSON.
//
// lang.Decode fills the structs from a block by their pipe tags;
// stdlib.DecodeSource and stdlib.Decode are where a program's blocks are
// decoded, once, after lang.Check. Every spec keeps Where, the ranges of
// its block and fields, so that an error found while reading the data
// still points at the field that caused it.
package spec
