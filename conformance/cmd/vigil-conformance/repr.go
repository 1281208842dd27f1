package main

// JSON representation of memberlist messages, shared by the vectors and
// decode commands: {"type": T, "fields": {...}} with the Go struct field
// names as keys.  Every field is present (omitempty ones too) so that a
// comparison against the Rust side is total.

import (
	"encoding/hex"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// Message is one message in the JSON contract.
type Message struct {
	Type   string                 `json:"type"`
	Fields map[string]interface{} `json:"fields"`
}

// PushPull is the Go-side value of a whole push/pull stream message, which
// memberlist never holds in one struct: header, states, raw user state.
type PushPull struct {
	Join      bool
	Nodes     int // header value; equals len(States) when we encode
	UserLen   int // header value; equals len(UserState) when we encode
	States    []memberlist.VPushNodeState
	UserState []byte
}

// UserStream is the TCP form of a user message: [8][userMsgHeader][raw].
type UserStream struct {
	UserMsgLen int
	Msg        []byte
}

// UDPUser is the UDP form of a user message: [8][raw].
type UDPUser struct {
	Msg []byte
}

// hexOrNull renders a []byte as lowercase hex, nil as JSON null, so that the
// nil/empty distinction Go makes on the wire (c0 vs a0) stays visible.
func hexOrNull(b []byte) interface{} {
	if b == nil {
		return nil
	}
	return hex.EncodeToString(b)
}

// represent converts a Go message value into the JSON contract form.
func represent(v interface{}) (Message, error) {
	switch m := v.(type) {
	case *memberlist.VPing:
		return Message{"ping", map[string]interface{}{
			"SeqNo": m.SeqNo, "Node": m.Node, "SourceAddr": hexOrNull(m.SourceAddr),
			"SourcePort": m.SourcePort, "SourceNode": m.SourceNode,
		}}, nil
	case *memberlist.VIndirectPingReq:
		return Message{"indirect_ping", map[string]interface{}{
			"SeqNo": m.SeqNo, "Target": hexOrNull(m.Target), "Port": m.Port,
			"Node": m.Node, "Nack": m.Nack, "SourceAddr": hexOrNull(m.SourceAddr),
			"SourcePort": m.SourcePort, "SourceNode": m.SourceNode,
		}}, nil
	case *memberlist.VAckResp:
		return Message{"ack", map[string]interface{}{"SeqNo": m.SeqNo, "Payload": hexOrNull(m.Payload)}}, nil
	case *memberlist.VNackResp:
		return Message{"nack", map[string]interface{}{"SeqNo": m.SeqNo}}, nil
	case *memberlist.VErrResp:
		return Message{"err", map[string]interface{}{"Error": m.Error}}, nil
	case *memberlist.VSuspect:
		return Message{"suspect", map[string]interface{}{"Incarnation": m.Incarnation, "Node": m.Node, "From": m.From}}, nil
	case *memberlist.VDead:
		return Message{"dead", map[string]interface{}{"Incarnation": m.Incarnation, "Node": m.Node, "From": m.From}}, nil
	case *memberlist.VAlive:
		return Message{"alive", map[string]interface{}{
			"Incarnation": m.Incarnation, "Node": m.Node, "Addr": hexOrNull(m.Addr),
			"Port": m.Port, "Meta": hexOrNull(m.Meta), "Vsn": hexOrNull(m.Vsn),
		}}, nil
	case *PushPull:
		states := make([]interface{}, len(m.States))
		for i, s := range m.States {
			states[i] = map[string]interface{}{
				"Name": s.Name, "Addr": hexOrNull(s.Addr), "Port": s.Port,
				"Meta": hexOrNull(s.Meta), "Incarnation": s.Incarnation,
				"State": int(s.State), "Vsn": hexOrNull(s.Vsn),
			}
		}
		return Message{"push_pull", map[string]interface{}{
			"Join": m.Join, "Nodes": m.Nodes, "UserStateLen": m.UserLen,
			"States": states, "UserState": hexOrNull(m.UserState),
		}}, nil
	case *UDPUser:
		return Message{"user", map[string]interface{}{"Msg": hexOrNull(m.Msg)}}, nil
	case *UserStream:
		return Message{"user_stream", map[string]interface{}{"UserMsgLen": m.UserMsgLen, "Msg": hexOrNull(m.Msg)}}, nil
	}
	return Message{}, fmt.Errorf("represent: unsupported value %T", v)
}

// encodeValue produces the wire bytes of a message value exactly as the Go
// send paths build them (type byte first).
func encodeValue(v interface{}) ([]byte, error) {
	switch m := v.(type) {
	case *memberlist.VPing:
		return memberlist.VEncode(memberlist.VPingMsg, m)
	case *memberlist.VIndirectPingReq:
		return memberlist.VEncode(memberlist.VIndirectPingMsg, m)
	case *memberlist.VAckResp:
		return memberlist.VEncode(memberlist.VAckRespMsg, m)
	case *memberlist.VNackResp:
		return memberlist.VEncode(memberlist.VNackRespMsg, m)
	case *memberlist.VErrResp:
		return memberlist.VEncode(memberlist.VErrMsg, m)
	case *memberlist.VSuspect:
		return memberlist.VEncode(memberlist.VSuspectMsg, m)
	case *memberlist.VDead:
		return memberlist.VEncode(memberlist.VDeadMsg, m)
	case *memberlist.VAlive:
		return memberlist.VEncode(memberlist.VAliveMsg, m)
	case *PushPull:
		return memberlist.VEncodePushPull(m.Join, m.States, m.UserState)
	case *UDPUser:
		// handleUser hands the bytes after the type byte to the delegate;
		// broadcasts are queued as [8][raw] by the application.
		return append([]byte{memberlist.VUserMsg}, m.Msg...), nil
	case *UserStream:
		return memberlist.VEncodeUserStream(m.Msg)
	}
	return nil, fmt.Errorf("encode: unsupported value %T", v)
}

func typeName(t byte) string {
	names := map[byte]string{
		memberlist.VPingMsg: "ping", memberlist.VIndirectPingMsg: "indirect_ping",
		memberlist.VAckRespMsg: "ack", memberlist.VSuspectMsg: "suspect",
		memberlist.VAliveMsg: "alive", memberlist.VDeadMsg: "dead",
		memberlist.VPushPullMsg: "push_pull", memberlist.VCompoundMsg: "compound",
		memberlist.VUserMsg: "user", memberlist.VCompressMsg: "compress",
		memberlist.VEncryptMsg: "encrypt", memberlist.VNackRespMsg: "nack",
		memberlist.VHasCrcMsg: "crc", memberlist.VErrMsg: "err",
		memberlist.VHasLabelMsg: "label",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", t)
}
