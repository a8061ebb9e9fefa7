// Pause on alerts: a rollout that names an Alertmanager starts no node
// while an alert that matches its matchers fires there, and goes on when
// the alert clears (docs/rollout.md, "Pause on alerts"). The matchers are
// parsed, and the Alertmanager asked, by pkg/rollout, so that the slim
// agent, which links this package, links neither.

package v1alpha1

// Reasons a running rollout starts no node for, at the start of its
// status.reason; a pool's condition takes them as its reason.
const (
	// ReasonPausedOnAlert: an alert that matches spec.pauseOnAlerts
	// fires; the alert's name follows.
	ReasonPausedOnAlert = "PausedOnAlert"
	// ReasonAlertsUnknown: the Alertmanager of spec.pauseOnAlerts could
	// not be asked, or its answer not read. No node starts until it
	// answers: an alert may fire that the driver cannot see.
	ReasonAlertsUnknown = "AlertsUnknown"
	// ReasonAlertmanagerNotAllowed: the controller drives the rollout, and
	// spec.pauseOnAlerts names an Alertmanager it was not started with
	// (--alertmanager-url). It asks none other, and starts no node.
	ReasonAlertmanagerNotAllowed = "AlertmanagerNotAllowed"
)

// ReasonInvalidPauseOnAlerts (a pool's Stalled): spec.strategy.pauseOnAlerts
// names no http or https URL, or a matcher that does not parse.
const ReasonInvalidPauseOnAlerts = "InvalidPauseOnAlerts"

// PauseOnAlerts names an Alertmanager and the alerts on it that hold a
// rollout: while one of them fires (is active, neither silenced nor
// inhibited, and matches every matcher), no node starts.
type PauseOnAlerts struct {
	// Alertmanager is the base URL of the Alertmanager, http or https,
	// such as http://alertmanager.monitoring:9093; the driver asks it
	// GET /api/v2/alerts. The controller asks only the Alertmanagers it
	// was started with (--alertmanager-url).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="must be an http or https URL, such as http://alertmanager.monitoring:9093"
	Alertmanager string `json:"alertmanager"`
	// Matchers select the alerts, in Alertmanager's matcher syntax:
	// name=value, name!=value, name=~regex, name!~regex. An alert must
	// match every one; none: every alert that fires.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=1024
	Matchers []string `json:"matchers,omitempty"`
}
