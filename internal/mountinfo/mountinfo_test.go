package mountinfo

import (
	"reflect"
	"testing"
)

// TestParse: each line gives its device, root and mount point with the
// octal escapes undone, and what follows the "-" (after any optional
// fields); a line without the "-" keeps its paths, a short one is skipped.
func TestParse(t *testing.T) {
	table := `36 35 98:0 /srv/my\040site /mnt/a\040b rw,noatime master:1 - ext4 /dev/root rw
30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate
31 25 0:27 /kube\134pod /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
40 36 8:1 / /data rw
short line
`
	want := []Mount{
		{Dev: "98:0", Root: "/srv/my site", Point: "/mnt/a b", FSType: "ext4", Source: "/dev/root", Super: "rw"},
		{Dev: "0:26", Root: "/", Point: "/sys/fs/cgroup", FSType: "cgroup2", Source: "cgroup2", Super: "rw,nsdelegate"},
		{Dev: "0:27", Root: `/kube\pod`, Point: "/sys/fs/cgroup/pids", FSType: "cgroup", Source: "cgroup", Super: "rw,pids"},
		{Dev: "8:1", Root: "/", Point: "/data"},
	}
	if got := Parse([]byte(table)); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
}
