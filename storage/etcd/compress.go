package etcd

import (
	"bytes"
	"compress/flate"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Values of pods and events can be written to etcd compressed (WithCompression):
// DEFLATE (RFC 1951) with a preset dictionary of that resource's typical
// bytes, so that what two pods share (field names, the defaults kube
// fills in, managedFields' JSON) costs nothing and only what is their
// own is stored: at 150,000 pods a running pod of ~2.4 KiB took ~300 bytes
// and an event of ~600 ~200 (keys and etcd's revisions aside).
//
// It is for large clusters on small machines: etcd's pages stay in memory
// (its compaction reads every one), and values of ~2.4 KiB fill bbolt's
// pages badly (a node holds at least two values, so two pods take two
// 4 KiB pages), so at 150,000 pods the pods and events are most of etcd's
// resident memory. It costs ~35 µs of CPU a write and ~5 µs a read. The
// watch cache keeps the values uncompressed, so LISTs and watches served
// from it cost the same.
//
// A compressed value is compressedPrefix, the dictionary's name, ':' and
// the DEFLATE stream. The prefix cannot begin a value corekube writes
// otherwise (protobuf's "k8s\x00", JSON's '{'), so a store reads both kinds
// whatever it writes: turning compression on or off needs no migration,
// and each value is rewritten in the other form when it next changes.
// kube-apiserver cannot read compressed values; a cluster that may move to
// it keeps compression off (the default), or rewrites every object with
// it off first.
//
// A dictionary's bytes are part of the storage format: a value is only
// readable with the dictionary it was written with, so a dictionary is
// never changed, only added under a new name (TestDictionariesFrozen).
const compressedPrefix = "corekube:z:"

var (
	//go:embed dictionaries/pods1.bin
	pods1 []byte
	//go:embed dictionaries/events1.bin
	events1 []byte
)

// The dictionaries, by the name a value carries. pods1 is two running pods
// as corekube stores them (one made by kubectl run, one by kubectl
// create); events1 a node's event and a pod's Scheduled, Pulling, Pulled,
// Created and Started events.
var dictionaries = map[string]*dictionary{
	"pods1":   newDictionary("pods1", pods1),
	"events1": newDictionary("events1", events1),
}

// compressedResources names the dictionary each compressed resource is
// written with (by the key's first segment): the resources that are
// many and large. Nodes and leases are few; compressing their frequent
// small writes would cost CPU for little memory.
var compressedResources = map[string]*dictionary{
	"pods":   dictionaries["pods1"],
	"events": dictionaries["events1"],
}

// compressionLevel is flate's default: at these sizes it costs no more
// time than the fastest level that takes a dictionary (2) and writes ~10%
// less.
const compressionLevel = flate.DefaultCompression

// dictionary compresses and decompresses with one preset dictionary. Its
// writers are pooled: each holds ~700 KB of flate's hash tables.
type dictionary struct {
	name string
	// prefix is compressedPrefix, name and ':'.
	prefix  string
	bytes   []byte
	writers sync.Pool // *flate.Writer
	readers sync.Pool // *inflater
}

func newDictionary(name string, dict []byte) *dictionary {
	d := &dictionary{name: name, prefix: compressedPrefix + name + ":", bytes: dict}
	d.writers.New = func() any {
		w, err := flate.NewWriterDict(nil, compressionLevel, d.bytes)
		if err != nil {
			panic(fmt.Sprintf("flate level %d: %v", compressionLevel, err)) // a constant level
		}
		return w
	}
	d.readers.New = func() any {
		in := &inflater{}
		in.r = flate.NewReaderDict(&in.src, d.bytes)
		return in
	}
	return d
}

// inflater is a pooled flate reader with its source and output buffers.
type inflater struct {
	src bytes.Reader
	r   io.ReadCloser
	out bytes.Buffer
}

// compressBuffers are the scratch buffers values are compressed into.
var compressBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// compress returns value as written: prefixed and compressed. A string
// because that is what etcd's put takes, which saves a copy.
func (d *dictionary) compress(value []byte) string {
	buf := compressBuffers.Get().(*bytes.Buffer)
	defer compressBuffers.Put(buf)
	buf.Reset()
	buf.WriteString(d.prefix)
	w := d.writers.Get().(*flate.Writer)
	defer d.writers.Put(w)
	w.Reset(buf)
	// Writing to a bytes.Buffer cannot fail.
	_, _ = w.Write(value)
	_ = w.Close()
	return buf.String()
}

// decompress returns the value data (the DEFLATE stream after the prefix)
// was compressed from, in a slice of its own exact size: the watch cache
// keeps it.
func (d *dictionary) decompress(data []byte) ([]byte, error) {
	in := d.readers.Get().(*inflater)
	defer d.readers.Put(in)
	in.src.Reset(data)
	if err := in.r.(flate.Resetter).Reset(&in.src, d.bytes); err != nil {
		return nil, err
	}
	in.out.Reset()
	if _, err := in.out.ReadFrom(in.r); err != nil {
		return nil, err
	}
	return bytes.Clone(in.out.Bytes()), nil
}

// errUnknownDictionary: a value names a dictionary this corekube does not
// have (a newer one wrote it).
var errUnknownDictionary = errors.New("unknown compression dictionary")

// decodeValue returns a stored value as the registry wrote it: a
// compressed one decompressed, any other as it is.
func decodeValue(value []byte) ([]byte, error) {
	if !bytes.HasPrefix(value, []byte(compressedPrefix)) {
		return value, nil
	}
	rest := value[len(compressedPrefix):]
	end := bytes.IndexByte(rest, ':')
	if end < 0 {
		return nil, fmt.Errorf("compressed value without a dictionary name: %w", errUnknownDictionary)
	}
	d := dictionaries[string(rest[:end])]
	if d == nil {
		return nil, fmt.Errorf("%w %q (written by a newer corekube?)", errUnknownDictionary, rest[:end])
	}
	out, err := d.decompress(rest[end+1:])
	if err != nil {
		return nil, fmt.Errorf("decompress with dictionary %s: %w", d.name, err)
	}
	return out, nil
}

// encodeValue returns what the store writes for value under key: value
// compressed when the store compresses key's resource, else value itself.
func (s *Store) encodeValue(key string, value []byte) string {
	if d := s.dictionaryFor(key); d != nil {
		return d.compress(value)
	}
	return string(value)
}

// dictionaryFor returns the dictionary key's values are written with, or
// nil to write them as they are.
func (s *Store) dictionaryFor(key string) *dictionary {
	if s.compressAll != nil {
		return s.compressAll
	}
	if !s.compress {
		return nil
	}
	return compressedResources[segment(key)]
}
