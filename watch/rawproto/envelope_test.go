package rawproto

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// TestParseEnvelope reads what Append writes and what kube's serializer
// writes (a runtime.Unknown marshalled by gogo), and refuses what is not a
// plain enveloped message.
func TestParseEnvelope(t *testing.T) {
	env := Envelope{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
	raw := []byte{0x0a, 0x03, 'a', 'b', 'c'}
	data := env.Append(nil, raw)
	gotEnv, gotRaw, err := ParseEnvelope(data)
	if err != nil || gotEnv != env || !bytes.Equal(gotRaw, raw) {
		t.Fatalf("ParseEnvelope(Append) = %+v %q %v", gotEnv, gotRaw, err)
	}
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Raw: raw}
	msg, err := unk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if gotEnv, gotRaw, err := ParseEnvelope(append([]byte(Magic), msg...)); err != nil || gotEnv.Kind != "Pod" || gotEnv.APIVersion != "v1" || !bytes.Equal(gotRaw, raw) {
		t.Errorf("kube's envelope read as %+v %q %v", gotEnv, gotRaw, err)
	}

	unk.ContentType = "application/json"
	withType, err := unk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"JSON":         []byte(`{"kind":"Pod"}`),
		"truncated":    data[:len(data)-5],
		"content type": append([]byte(Magic), withType...),
		"varint field": append([]byte(Magic), 0x08, 0x01),
	} {
		if _, _, err := ParseEnvelope(bad); err == nil {
			t.Errorf("%s: %q parsed", name, bad)
		} else if !strings.Contains(err.Error(), "rawproto") {
			t.Errorf("%s: error %q does not say where it comes from", name, err)
		}
	}
	if IsEnveloped([]byte(`{"kind":"Pod"}`)) || !IsEnveloped(data) {
		t.Error("IsEnveloped")
	}
}
