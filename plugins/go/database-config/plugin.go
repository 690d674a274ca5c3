// Package databaseconfig is `database-config` in Go: it reconciles each Database
// (demo.wasmop.dev/v1, the CRD in plugins/rust/database-config/crd.yaml) into a ConfigMap
// `<name>-config` that applications mount, and reports a Ready condition; and reviews
// Databases before they are stored (replicas defaulted; an unknown engine, a port outside
// 1-65535 or a bad host refused). The same logic as the Rust plugin, passing the same golden
// cases (plugins/rust/database-config/tests/cases and tests/admission).
//
// Build: guest-sdk/go/build plugins/go/database-config -o database-config.wasm
package databaseconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"wasmop.dev/wasmop"
)

// DatabaseKind is the primary kind.
var DatabaseKind = wasmop.Kind{Group: "demo.wasmop.dev", Version: "v1", Kind: "Database", Namespaced: true}

// Database is a database applications connect to.
type Database struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
	Spec              DatabaseSpec    `json:"spec"`
	Status            *DatabaseStatus `json:"status,omitempty"`
}

// DatabaseSpec is the Database's spec; every field is required, as the CRD says.
type DatabaseSpec struct {
	Engine   Engine `json:"engine"`
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Replicas uint32 `json:"replicas"`
}

// Engine is a database engine, used as the URL scheme: one of [Engines].
type Engine string

// Engines are the engines a Database can run, as the CRD's enum lists them.
var Engines = []Engine{"postgres", "mysql", "mariadb"}

// UnmarshalJSON accepts only one of [Engines], so that a Database with another engine fails
// to decode (a permanent error naming the engines, in serde's words, as the Rust plugin's
// enum does) instead of being written into a ConfigMap.
func (e *Engine) UnmarshalJSON(data []byte) error {
	var name string
	if err := json.Unmarshal(data, &name); err != nil {
		return err
	}
	if !slices.Contains(Engines, Engine(name)) {
		known := make([]string, len(Engines))
		for i, engine := range Engines {
			known[i] = "`" + string(engine) + "`"
		}
		return fmt.Errorf("unknown variant `%s`, expected one of %s", name, strings.Join(known, ", "))
	}
	*e = Engine(name)
	return nil
}

// DatabaseStatus is what the plugin last observed and did.
type DatabaseStatus struct {
	Conditions         []wasmop.Condition `json:"conditions,omitempty"`
	ObservedGeneration *int64             `json:"observedGeneration"`
}

// DatabaseConfig is the reconciler.
type DatabaseConfig struct {
	wasmop.NoCleanup[*Database]
}

func init() { wasmop.Register[*Database](DatabaseConfig{}) }

// Describe declares the plugin: it owns the ConfigMaps it writes.
func (DatabaseConfig) Describe() wasmop.Info {
	return wasmop.NewInfo("database-config", "0.1.0", DatabaseKind).Owns(wasmop.ConfigMapKind)
}

// Reconcile applies the ConfigMap and records Ready in the status (written only on a change).
func (DatabaseConfig) Reconcile(ctx *wasmop.Context, db *Database) (wasmop.Action, error) {
	spec := db.Spec
	name := db.Name + "-config"
	meta, err := wasmop.OwnedMeta(db, name)
	if err != nil {
		return wasmop.Done(), err
	}
	port := strconv.Itoa(int(spec.Port))
	_, err = ctx.Apply(&wasmop.ConfigMap{
		ObjectMeta: meta,
		Data: map[string]string{
			"engine":   string(spec.Engine),
			"host":     spec.Host,
			"port":     port,
			"replicas": strconv.FormatUint(uint64(spec.Replicas), 10),
			"url":      fmt.Sprintf("%s://%s:%s", spec.Engine, spec.Host, port),
		},
	})
	if err != nil {
		return wasmop.Done(), err
	}

	old := DatabaseStatus{}
	if db.Status != nil {
		old = *db.Status
	}
	generation := db.Generation
	status := DatabaseStatus{Conditions: append([]wasmop.Condition(nil), old.Conditions...)}
	if generation != 0 {
		status.ObservedGeneration = &generation
	}
	message := fmt.Sprintf("ConfigMap %s is up to date", name)
	wasmop.SetCondition(&status.Conditions, wasmop.NewCondition("Ready", true, "ConfigApplied", message, generation))
	if !reflect.DeepEqual(status, old) {
		if _, err := ctx.UpdateStatus(db, status); err != nil {
			return wasmop.Done(), err
		}
		// Only on a change, so the Event records what happened to the Database, not every
		// resync.
		if err := ctx.Event(db, wasmop.NormalEvent("ConfigApplied", "Apply", message)); err != nil {
			return wasmop.Done(), err
		}
	}
	return wasmop.Done(), nil
}

// DatabaseReview is a Database as admission sees it: every spec field any JSON value, kept
// as it was sent, so that nothing fails to decode before the checks have named it (the Rust
// plugin's DatabaseReview, for the same messages).
type DatabaseReview struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
	Spec              map[string]json.RawMessage `json:"spec,omitempty"`
}

// DefaultKind is the reviewed kind.
func (*DatabaseReview) DefaultKind() wasmop.Kind { return DatabaseKind }

// DatabaseAdmission defaults spec.replicas (mutating) and refuses an unknown engine, a port
// outside 1-65535 and a host that is neither a DNS name nor an IP address (validating), in
// the Rust plugin's words.
type DatabaseAdmission struct{}

// DefaultReplicas is what replicas is when a Database does not say.
const DefaultReplicas = 1

// Webhooks: a mutating webhook that may fail open, a validating one that fails closed.
func (DatabaseAdmission) Webhooks() wasmop.Webhooks {
	ops := []wasmop.Operation{wasmop.Create, wasmop.Update}
	return wasmop.Webhooks{
		Mutating:   &wasmop.Webhook{Operations: ops, FailurePolicy: wasmop.Ignore, TimeoutSeconds: 5},
		Validating: &wasmop.Webhook{Operations: ops, TimeoutSeconds: 5},
	}
}

// Mutate fills in replicas when the Database does not say.
func (DatabaseAdmission) Mutate(_ *wasmop.Context, r wasmop.Review[*DatabaseReview]) (*DatabaseReview, wasmop.Allowed, error) {
	db := r.Object
	if db == nil || !missing(db.Spec["replicas"]) {
		return nil, wasmop.Allowed{}, nil
	}
	if db.Spec == nil {
		db.Spec = map[string]json.RawMessage{}
	}
	db.Spec["replicas"] = json.RawMessage(strconv.Itoa(DefaultReplicas))
	return db, wasmop.Allowed{}, nil
}

// Validate refuses a Database whose spec breaks a rule, naming every field that does.
func (DatabaseAdmission) Validate(_ *wasmop.Context, r wasmop.Review[*DatabaseReview]) (wasmop.Allowed, error) {
	db := r.Object
	if db == nil {
		return wasmop.Allowed{}, nil
	}
	found := problems(db.Spec)
	if len(found) == 0 {
		return wasmop.Allowed{}, nil
	}
	name := db.Name
	if name == "" {
		name = "(generated)"
	}
	return wasmop.Allowed{}, wasmop.RefuseInvalid("Database %s is invalid: %s", name, strings.Join(found, "; "))
}

func missing(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// shown is a value as the Rust plugin shows it in a message: compact JSON.
func shown(raw json.RawMessage) string {
	var out bytes.Buffer
	if json.Compact(&out, raw) != nil {
		return string(raw)
	}
	return out.String()
}

// problems says what is wrong with spec, one message per field, as the API server words
// field errors.
func problems(spec map[string]json.RawMessage) []string {
	var found []string
	engine := spec["engine"]
	var name string
	switch {
	case missing(engine):
		found = append(found, "spec.engine: Required value")
	case json.Unmarshal(engine, &name) != nil || !slices.Contains(Engines, Engine(name)):
		found = append(found, fmt.Sprintf(`spec.engine: Unsupported value: %s: supported values: "postgres", "mysql", "mariadb"`, shown(engine)))
	}
	port := spec["port"]
	if missing(port) {
		found = append(found, "spec.port: Required value")
	} else if p, err := strconv.ParseUint(string(bytes.TrimSpace(port)), 10, 64); err != nil || p < 1 || p > 65535 {
		found = append(found, fmt.Sprintf("spec.port: Invalid value: %s: must be a TCP port, 1 to 65535", shown(port)))
	}
	host := spec["host"]
	var h string
	switch {
	case missing(host):
		found = append(found, "spec.host: Required value")
	case json.Unmarshal(host, &h) != nil || !(isDNSName(h) || net.ParseIP(h) != nil):
		found = append(found, fmt.Sprintf("spec.host: Invalid value: %s: must be a DNS name (lowercase letters, digits, '-' and '.') or an IP address", shown(host)))
	}
	return found
}

// isDNSName: a DNS-1123 subdomain, dot-separated labels of lowercase letters, digits and
// '-', each starting and ending with a letter or digit.
func isDNSName(host string) bool {
	if len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		for i, c := range []byte(label) {
			alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
			if !alnum && (c != '-' || i == 0 || i == len(label)-1) {
				return false
			}
		}
	}
	return true
}

func init() { wasmop.RegisterAdmission[*DatabaseReview](DatabaseAdmission{}) }
