package main

import (
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=..." (the
// Dockerfile's VERSION argument); empty, the build info says.
var version string

// buildVersion is what `voiceroom version` prints and serve logs at start.
type buildVersion struct {
	// Version is -X main.version when set, else the main module's version
	// from the build info (a tag such as v1.4.0, or the pseudo-version Go
	// derives from the VCS, v0.0.0-20261204110747-73f2698d6519), else "dev".
	Version string
	// Revision is the VCS revision the binary was built from (vcs.revision),
	// empty when the build recorded none (-buildvcs=false, no VCS).
	Revision string
	// Time is the revision's commit time (vcs.time), when recorded.
	Time string
	// Modified is whether the work tree had changes (vcs.modified).
	Modified bool
}

// readBuildVersion reads this binary's buildVersion.
func readBuildVersion() buildVersion {
	info, _ := debug.ReadBuildInfo()
	return versionOf(version, info)
}

// versionOf makes the buildVersion of a binary whose -X main.version is
// stamped and whose build info is info (nil when it has none).
func versionOf(stamped string, info *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: stamped}
	if info != nil {
		if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	return v
}

// String is `voiceroom version`'s line: "voiceroom VERSION", then the
// revision, its time and whether the tree was modified when recorded, e.g.
// "voiceroom v1.4.0 (revision 73f2698d…, 2026-12-04T11:07:47Z, modified)".
func (v buildVersion) String() string {
	s := "voiceroom " + v.Version
	if v.Revision == "" {
		return s
	}
	parts := []string{"revision " + v.Revision}
	if v.Time != "" {
		parts = append(parts, v.Time)
	}
	if v.Modified {
		parts = append(parts, "modified")
	}
	return s + " (" + strings.Join(parts, ", ") + ")"
}
