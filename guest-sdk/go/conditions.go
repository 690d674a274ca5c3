package wasmop

import "time"

// ConditionStatus is a condition's status: "True", "False" or "Unknown".
type ConditionStatus string

// The three condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one entry of status.conditions, as metav1.Condition (the same JSON).
type Condition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	ObservedGeneration int64           `json:"observedGeneration,omitempty"`
	LastTransitionTime string          `json:"lastTransitionTime"`
	Reason             string          `json:"reason"`
	Message            string          `json:"message"`
}

// Now is the current time in whole seconds as Kubernetes stores times
// ("2025-01-01T00:00:00Z"), from the host's wall clock (stopped at the scenario's time in
// `wasmop test`). A clock before 1970 reads as the epoch.
func Now() string {
	now := time.Now().UTC()
	if now.Unix() < 0 {
		now = time.Unix(0, 0).UTC()
	}
	// RFC3339 of a UTC time in whole seconds is that form; unlike a layout of our own it takes
	// the time package's fast path instead of parsing the layout on every call.
	return now.Truncate(time.Second).Format(time.RFC3339)
}

// NewCondition is a condition of type conditionType with status true or false, a CamelCase
// reason and a message, describing the object's generation observedGeneration (pass its
// metadata.generation; 0 leaves it out), transitioning now.
func NewCondition(conditionType string, status bool, reason, message string, observedGeneration int64) Condition {
	s := ConditionFalse
	if status {
		s = ConditionTrue
	}
	return Condition{
		Type:               conditionType,
		Status:             s,
		ObservedGeneration: observedGeneration,
		LastTransitionTime: Now(),
		Reason:             reason,
		Message:            message,
	}
}

// SetCondition puts c into conditions, replacing the condition of the same type. When the
// status is unchanged the old lastTransitionTime is kept, as the Kubernetes API conventions
// (and the Rust SDK) want. It reports whether anything but the time changed, so a plugin can
// skip a status write that would change nothing.
func SetCondition(conditions *[]Condition, c Condition) bool {
	for i, old := range *conditions {
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		changed := old != c
		(*conditions)[i] = c
		return changed
	}
	*conditions = append(*conditions, c)
	return true
}

// FindCondition returns the condition of conditionType, or nil.
func FindCondition(conditions []Condition, conditionType string) *Condition {
	for i := range conditions {
		if conditions[i].Type == conditionType {
			return &conditions[i]
		}
	}
	return nil
}

// IsConditionTrue reports whether the condition of conditionType is present and "True".
func IsConditionTrue(conditions []Condition, conditionType string) bool {
	c := FindCondition(conditions, conditionType)
	return c != nil && c.Status == ConditionTrue
}
