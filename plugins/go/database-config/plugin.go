// Package databaseconfig is `database-config` in Go: it reconciles each Database
// (demo.wasmop.dev/v1, the CRD in plugins/rust/database-config/crd.yaml) into a ConfigMap
// `<name>-config` that applications mount, and reports a Ready condition. The same logic as
// the Rust plugin, passing the same golden cases (plugins/rust/database-config/tests/cases).
//
// Build: guest-sdk/go/build plugins/go/database-config -o database-config.wasm
package databaseconfig

import (
	"encoding/json"
	"fmt"
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
