package handlers

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file negotiates the response encoding from the Accept header the way
// kube-apiserver 1.32 does (apiserver's endpoints/handlers/negotiation on
// top of munnerz/goautoneg):
//
//   - the entries are ordered by q-value, then a concrete type before a
//     wildcard; entries that compare equal keep no guaranteed order, exactly
//     as in goautoneg, whose unstable sort.Sort this file reproduces;
//   - the first entry that one of the served media types matches (exactly,
//     type/* or */*) and whose parameters the endpoint can honour wins; for
//     a wildcard the first served type in kube's order (JSON, YAML,
//     protobuf) that the parameters allow;
//   - kube 1.32 does not read q=0 as "not acceptable": such an entry only
//     sorts last and is still served when nothing else fits;
//   - nothing acceptable is 406 with the list of served media types.

// mediaType is a negotiated response encoding.
type mediaType int

const (
	mediaJSON mediaType = iota
	mediaYAML
	mediaProtobuf
)

// contentType is the Content-Type of an answer in m.
func (m mediaType) contentType() string {
	switch m {
	case mediaYAML:
		return "application/yaml"
	case mediaProtobuf:
		return protobufMediaType
	default:
		return "application/json"
	}
}

func (m mediaType) String() string { return m.contentType() }

// servedMediaTypes are the encodings kube's codec factory offers for the
// built-in types, in its order, which decides what a wildcard gets.
var servedMediaTypes = [...]struct {
	media         mediaType
	typ, subtype  string
	streamCapable bool // has a watch stream encoding (YAML has none)
}{
	{mediaJSON, "application", "json", true},
	{mediaYAML, "application", "yaml", false},
	{mediaProtobuf, "application", "vnd.kubernetes.protobuf", true},
}

// errNotAcceptable is kube's 406, word for word.
var errNotAcceptable = newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
	"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf")

// errNotAcceptableStream is kube's 406 for a watch whose accepted entry
// has no stream encoding (YAML).
var errNotAcceptableStream = newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
	"only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch")

// negotiation is the outcome of negotiating one response.
type negotiation struct {
	media mediaType
	// target is the form the accepted entry asks for with its as, g and v
	// parameters (Table, PartialObjectMetadata[List]); nil for the object
	// itself.
	target *schema.GroupVersionKind
	// pretty is the entry's pretty=1 parameter (indented JSON).
	pretty bool
}

// endpoint says which Accept parameters an endpoint honours, kube's
// EndpointRestrictions.
type endpoint struct {
	// transforms allows the as/g/v forms of table.go: resource endpoints
	// (kube's RequestScope). Without it (errors, discovery) an entry
	// asking for another form is passed over, as with kube's
	// DefaultEndpointRestrictions.
	transforms bool
}

var (
	resourceEndpoint = endpoint{transforms: true}
	plainEndpoint    = endpoint{}
)

// negotiate picks the encoding and form of a resource endpoint's answer;
// an Accept header with nothing acceptable is kube's 406.
func negotiate(r *http.Request) (negotiation, error) {
	n, ok := resourceEndpoint.negotiate(r.Header.Get("Accept"))
	if !ok {
		return negotiation{}, errNotAcceptable
	}
	return n, nil
}

// negotiateStream is negotiate for a watch: the accepted entry must have a
// stream encoding (kube's NegotiateOutputMediaTypeStream, which does not
// go on to later entries either).
func negotiateStream(r *http.Request) (negotiation, error) {
	n, ok := resourceEndpoint.negotiate(r.Header.Get("Accept"))
	if !ok || !servedMediaTypes[n.media].streamCapable {
		return negotiation{}, errNotAcceptableStream
	}
	return n, nil
}

// negotiate returns the answer's encoding and form for an Accept header;
// false when no entry is acceptable. No header at all is JSON.
func (e endpoint) negotiate(header string) (negotiation, bool) {
	if header == "" {
		return negotiation{media: mediaJSON}, true
	}
	for _, c := range parseAccept(header) {
		for _, s := range servedMediaTypes {
			matches := (c.typ == s.typ && (c.subtype == s.subtype || c.subtype == "*")) ||
				(c.typ == "*" && c.subtype == "*")
			if !matches {
				continue
			}
			if n, ok := e.accept(c.params, s.media, s.streamCapable); ok {
				return n, true
			}
		}
	}
	return negotiation{}, false
}

// accept reads an entry's parameters for one served media type, kube's
// acceptMediaTypeOptions; false when the endpoint cannot honour them.
// Unknown parameters are ignored.
func (e endpoint) accept(params map[string]string, media mediaType, streamCapable bool) (negotiation, bool) {
	n := negotiation{media: media}
	for k, v := range params {
		switch k {
		case "as", "g", "v":
			if n.target == nil {
				n.target = &schema.GroupVersionKind{}
			}
			switch k {
			case "as":
				n.target.Kind = v
			case "g":
				n.target.Group = v
			default:
				n.target.Version = v
			}
		case "stream":
			if v != "" && (!streamCapable || v != "watch") {
				return negotiation{}, false
			}
		case "sv":
			// The server version of the meta types: resource endpoints
			// serve meta.k8s.io/v1, the others none.
			if v != "" && (!e.transforms || v != metav1.SchemeGroupVersion.Version) {
				return negotiation{}, false
			}
		case "pretty":
			n.pretty = v == "1"
		}
	}
	if !e.allowsTransform(media, n.target) {
		return negotiation{}, false
	}
	return n, true
}

// allowsTransform is kube's RequestScope.AllowsMediaTypeTransform for
// built-in resources: Tables exist only as JSON and YAML (metav1.Table has
// no protobuf encoding), PartialObjectMetadata[List] in every encoding.
func (e endpoint) allowsTransform(media mediaType, target *schema.GroupVersionKind) bool {
	if target == nil {
		return true
	}
	if !e.transforms {
		return false
	}
	if gv := target.GroupVersion(); gv != metav1.SchemeGroupVersion && gv != metav1beta1.SchemeGroupVersion {
		return false
	}
	switch target.Kind {
	case "Table":
		return media == mediaJSON || media == mediaYAML
	case "PartialObjectMetadata", "PartialObjectMetadataList":
		return true
	}
	return false
}

// acceptClause is one entry of an Accept header.
type acceptClause struct {
	typ, subtype string
	q            float64
	params       map[string]string // without q; values unquoted as sent
}

// parseAccept splits an Accept header into its entries, most preferred
// first, with goautoneg's leniency: a malformed entry or parameter is
// skipped, a malformed q-value is 0, names and values are not lowercased
// or unquoted.
func parseAccept(header string) []acceptClause {
	parts := strings.Split(header, ",")
	clauses := make([]acceptClause, 0, len(parts))
	for _, part := range parts {
		part = strings.Trim(part, " ")
		c := acceptClause{q: 1}
		mediaRange, params, hasParams := strings.Cut(part, ";")
		typ, subtype, _ := strings.Cut(mediaRange, "/")
		c.typ = strings.Trim(typ, " ")
		switch {
		case subtype == "" && c.typ == "*":
			c.subtype = "*" // "*" alone stands for */*
		case subtype == "" || strings.Contains(subtype, "/"):
			continue
		default:
			c.subtype = strings.Trim(subtype, " ")
		}
		if hasParams {
			c.params = make(map[string]string)
			for _, p := range strings.Split(params, ";") {
				key, value, ok := strings.Cut(p, "=")
				if !ok || value == "" || strings.Contains(value, "=") {
					continue
				}
				key = strings.Trim(key, " ")
				if key == "q" {
					// As goautoneg: parsed untrimmed at float32
					// precision, an error leaving 0.
					c.q, _ = strconv.ParseFloat(value, 32)
					continue
				}
				c.params[key] = strings.Trim(value, " ")
			}
		}
		clauses = append(clauses, c)
	}
	sort.Sort(byPreference(clauses))
	return clauses
}

// byPreference orders Accept entries as goautoneg does. Its Less is not a
// strict weak order (a wildcard with a higher q both precedes and follows
// a concrete type), so the result depends on the sorting algorithm: this is
// the same sort.Sort over the same comparison kube-apiserver runs.
type byPreference []acceptClause

func (s byPreference) Len() int      { return len(s) }
func (s byPreference) Swap(i, j int) { s[i], s[j] = s[j], s[i] }
func (s byPreference) Less(i, j int) bool {
	a, b := s[i], s[j]
	switch {
	case a.q > b.q:
		return true
	case a.typ != "*" && b.typ == "*":
		return true
	case a.subtype != "*" && b.subtype == "*":
		return true
	}
	return false
}

// wantsPretty reports whether a JSON answer is indented, as kube decides:
// the entry's pretty=1, the pretty query parameter, else a User-Agent of
// a human's tool.
func wantsPretty(r *http.Request, n negotiation) bool {
	if n.pretty {
		return true
	}
	if p := r.URL.Query().Get("pretty"); p != "" {
		b, _ := strconv.ParseBool(p)
		return b
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}
