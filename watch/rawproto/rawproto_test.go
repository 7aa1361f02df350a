package rawproto

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// gogoEnvelope is the envelope as apimachinery's serializer writes it.
func gogoEnvelope(t *testing.T, e Envelope, raw []byte) []byte {
	t.Helper()
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: e.APIVersion, Kind: e.Kind}, Raw: raw}
	data, err := unk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(Magic), data...)
}

// sizes cross the one-, two- and three-byte varint lengths.
var sizes = []int{1, 100, 127, 128, 300, 16383, 16384, 70000, 3 << 20}

var envelopes = []Envelope{
	{APIVersion: "v1", Kind: "Pod"},
	{APIVersion: "v1", Kind: "PodList"},
	{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
	{APIVersion: strings.Repeat("g", 130) + "/v1", Kind: "Long"},
}

func TestEnvelopeMatchesGogo(t *testing.T) {
	for _, e := range envelopes {
		for _, n := range sizes {
			raw := bytes.Repeat([]byte{0xab}, n)
			got := e.Append([]byte("prefix"), raw)
			want := append([]byte("prefix"), gogoEnvelope(t, e, raw)...)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s %d bytes: envelope differs from runtime.Unknown.Marshal", e.Kind, n)
			}
			if e.Size(n) != len(want)-len("prefix") {
				t.Errorf("%s %d bytes: Size %d, encoded %d", e.Kind, n, e.Size(n), len(want)-len("prefix"))
			}
		}
	}
}

func TestWatchFrameMatchesGogo(t *testing.T) {
	for _, e := range envelopes {
		for _, n := range sizes {
			for _, typ := range []string{"ADDED", "MODIFIED", "DELETED"} {
				raw := bytes.Repeat([]byte{0x5a}, n)
				ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: gogoEnvelope(t, e, raw)}}
				msg, err := ev.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				want := binary.BigEndian.AppendUint32([]byte("x"), uint32(len(msg)))
				want = append(want, msg...)
				if got := e.AppendWatchFrame([]byte("x"), typ, raw); !bytes.Equal(got, want) {
					t.Fatalf("%s %s %d bytes: frame differs from metav1.WatchEvent.Marshal", typ, e.Kind, n)
				}
			}
		}
	}
}

func TestListFields(t *testing.T) {
	// A list of two "items" against gogo's encoding of a PartialObjectMetadataList,
	// which numbers its fields as every list does.
	rc := int64(3)
	list := metav1.PartialObjectMetadataList{
		ListMeta: metav1.ListMeta{ResourceVersion: "12", Continue: "abc", RemainingItemCount: &rc},
		Items: []metav1.PartialObjectMetadata{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"x": "y"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("b", 200)}},
		},
	}
	want, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := list.ListMeta.Marshal()
	got := AppendField(nil, ListMetaField, lm)
	for _, item := range list.Items {
		data, _ := item.Marshal()
		if FieldSize(len(data)) != 1+uvarintLen(uint64(len(data)))+len(data) {
			t.Fatal("FieldSize")
		}
		got = AppendField(got, ListItemsField, data)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("list fields differ:\n got %x\nwant %x", got, want)
	}
}
