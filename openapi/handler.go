package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The media types of the documents, as kube-openapi names them.
const (
	v2ProtobufSubtype           = "com.github.proto-openapi.spec.v2.v1.0+protobuf"
	v2ProtobufSubtypeDeprecated = "com.github.proto-openapi.spec.v2@v1.0+protobuf"
	v3ProtobufSubtype           = "com.github.proto-openapi.spec.v3.v1.0+protobuf"
	v3ProtobufSubtypeDeprecated = "com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// gzipMinSize is the size below which responses are not compressed (the
// gzip handler kube wraps /openapi/v2 in uses the same threshold).
const gzipMinSize = 1400

// blob is one served document: its bytes, their hash, and the derived
// forms (gzip, protobuf) computed at most once.
type blob struct {
	data        []byte
	hash        string // SHA-512 of data, upper-case hex, as kube's ETag
	contentType string

	gzOnce sync.Once
	gz     []byte

	toProto func([]byte) ([]byte, error)
	pbOnce  sync.Once
	pb      *blob
	pbErr   error
}

func newBlob(data []byte, contentType string, toProto func([]byte) ([]byte, error)) *blob {
	return &blob{data: data, hash: fmt.Sprintf("%X", sha512.Sum512(data)), contentType: contentType, toProto: toProto}
}

func (b *blob) gzipped() []byte {
	b.gzOnce.Do(func() {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
		_, _ = zw.Write(b.data)
		_ = zw.Close()
		b.gz = buf.Bytes()
	})
	return b.gz
}

// protobuf returns the protobuf form; it shares the JSON form's hash, as
// in kube.
func (b *blob) protobuf(contentType string) (*blob, error) {
	b.pbOnce.Do(func() {
		data, err := b.toProto(b.data)
		if err != nil {
			b.pbErr = err
			return
		}
		b.pb = &blob{data: data, hash: b.hash, contentType: contentType}
	})
	return b.pb, b.pbErr
}

// warm computes the derived forms ahead of the first request.
func (b *blob) warm(protoContentType string) error {
	b.gzipped()
	if b.toProto == nil {
		return nil
	}
	pb, err := b.protobuf(protoContentType)
	if err != nil {
		return err
	}
	pb.gzipped()
	return nil
}

// Warm computes the protobuf and gzip forms of every document, so that no
// request waits for them (a request that comes first computes the form it
// needs, once). Call it in the background after Build.
func (d *Document) Warm() error {
	_ = d.index.warm("")
	if err := d.v2.warm("application/" + v2ProtobufSubtype); err != nil {
		return fmt.Errorf("openapi: protobuf form of /openapi/v2: %w", err)
	}
	for _, p := range d.v3Paths {
		if err := d.v3Blobs[p].warm("application/" + v3ProtobufSubtype); err != nil {
			return fmt.Errorf("openapi: protobuf form of /openapi/v3/%s: %w", p, err)
		}
	}
	return nil
}

// serve writes b with its ETag, honouring If-None-Match (304), Range and
// HEAD through http.ServeContent, gzip-compressed when the client takes it.
func (d *Document) serve(w http.ResponseWriter, r *http.Request, b *blob) {
	h := w.Header()
	h.Set("Content-Type", b.contentType)
	h.Set("Etag", strconv.Quote(b.hash))
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache, private")
	}
	data := b.data
	if len(data) >= gzipMinSize {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			data = b.gzipped()
		}
	}
	http.ServeContent(w, r, "", d.built, bytes.NewReader(data))
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			_, q, ok := strings.Cut(strings.ReplaceAll(params, " ", ""), "q=")
			if ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}

// acceptClause is one media range of an Accept header.
type acceptClause struct {
	typ, subtype string
	q            float64
}

// parseAccept parses an Accept header into its media ranges, most
// preferred first (quality, then specificity, then order), as goautoneg
// does for kube-openapi. An empty header accepts anything.
func parseAccept(header string) []acceptClause {
	if strings.TrimSpace(header) == "" {
		header = "*/*"
	}
	var out []acceptClause
	for _, part := range strings.Split(header, ",") {
		fields := strings.Split(part, ";")
		mt := strings.TrimSpace(fields[0])
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok {
			if mt != "*" {
				continue
			}
			typ, sub = "*", "*"
		}
		c := acceptClause{typ: strings.TrimSpace(typ), subtype: strings.TrimSpace(sub), q: 1}
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					c.q = f
				}
			}
		}
		if c.q > 0 {
			out = append(out, c)
		}
	}
	specificity := func(c acceptClause) int {
		switch {
		case c.typ == "*":
			return 0
		case c.subtype == "*":
			return 1
		}
		return 2
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].q != out[j].q {
			return out[i].q > out[j].q
		}
		return specificity(out[i]) > specificity(out[j])
	})
	return out
}

// negotiate returns the first of offers (application subtypes) the
// Accept header takes, or "".
func negotiate(r *http.Request, offers ...string) string {
	for _, c := range parseAccept(r.Header.Get("Accept")) {
		for _, o := range offers {
			if (c.typ == "application" || c.typ == "*") && (c.subtype == o || c.subtype == "*") {
				return o
			}
		}
	}
	return ""
}

// ServeV2 serves GET /openapi/v2: the Swagger 2.0 document as JSON, or as
// gnostic protobuf for Accept:
// application/com.github.proto-openapi.spec.v2@v1.0+protobuf (kubectl).
func (d *Document) ServeV2(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Accept")
	switch negotiate(r, "json", v2ProtobufSubtypeDeprecated, v2ProtobufSubtype) {
	case "json":
		d.serve(w, r, d.v2)
	case v2ProtobufSubtype, v2ProtobufSubtypeDeprecated:
		pb, err := d.v2.protobuf("application/" + v2ProtobufSubtype)
		if err != nil {
			slog.Error("openapi v2 protobuf", "err", err)
			http.Error(w, "the OpenAPI document could not be encoded", http.StatusInternalServerError)
			return
		}
		d.serve(w, r, pb)
	default:
		w.WriteHeader(http.StatusNotAcceptable)
	}
}

// v3Discovery is the /openapi/v3 index.
type v3Discovery struct {
	Paths map[string]v3DiscoveryGroupVersion `json:"paths"`
}

type v3DiscoveryGroupVersion struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

// serverRelativeURL is where the document of gvPath is served for good:
// /openapi/v3/apis/policy/v1?hash=<HASH>.
func serverRelativeURL(gvPath, hash string) string {
	u := url.URL{Path: path.Join("/openapi/v3", gvPath), RawQuery: url.Values{"hash": {hash}}.Encode()}
	return u.String()
}

func v3Index(d *Document) ([]byte, error) {
	idx := v3Discovery{Paths: map[string]v3DiscoveryGroupVersion{}}
	for _, p := range d.v3Paths {
		idx.Paths[p] = v3DiscoveryGroupVersion{ServerRelativeURL: serverRelativeURL(p, d.v3Blobs[p].hash)}
	}
	return json.Marshal(idx)
}

// ServeV3Index serves GET /openapi/v3: the paths of the documents with
// their hashed URLs.
func (d *Document) ServeV3Index(w http.ResponseWriter, r *http.Request) {
	d.serve(w, r, d.index)
}

// ServeV3 serves GET /openapi/v3/<path>: one OpenAPI 3 document, as JSON
// or gnostic protobuf. With ?hash= equal to the document's hash the answer
// may be cached for good; with another hash it redirects to the current
// one.
func (d *Document) ServeV3(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/openapi/v3/")
	b := d.v3Blobs[p]
	if b == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Add("Vary", "Accept")
	var out *blob
	switch negotiate(r, "json", v3ProtobufSubtype, v3ProtobufSubtypeDeprecated) {
	case "json":
		out = b
	case v3ProtobufSubtype, v3ProtobufSubtypeDeprecated:
		pb, err := b.protobuf("application/" + v3ProtobufSubtype)
		if err != nil {
			slog.Error("openapi v3 protobuf", "path", p, "err", err)
			http.Error(w, "the OpenAPI document could not be encoded", http.StatusInternalServerError)
			return
		}
		out = pb
	default:
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != b.hash {
			w.Header().Set("Etag", strconv.Quote(b.hash))
			http.Redirect(w, r, serverRelativeURL(p, b.hash), http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	}
	d.serve(w, r, out)
}
