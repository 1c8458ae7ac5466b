#!/bin/sh
# Regenerates tbpb/ from proto/ with protoc and the protoc-gen-go of the
# go.mod's google.golang.org/protobuf (go generate ./run/tensorboard).
set -eu
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" -I proto \
	--go_out=. --go_opt=module=pipe/run/tensorboard \
	proto/tensorboard/compat/proto/*.proto proto/tensorboard/plugins/hparams/*.proto
