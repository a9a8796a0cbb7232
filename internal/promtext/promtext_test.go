package promtext

import "testing"

func TestSum(t *testing.T) {
	page := []byte(`# TYPE reads_total counter
reads_total{app="a"} 3
reads_total{app="b"} 4.5
# TYPE lag gauge
lag 7
# TYPE d histogram
d_bucket{le="+Inf"} 1
d_sum 2
d_count 1
`)
	got, err := Sum(page)
	if err != nil {
		t.Fatal(err)
	}
	if got["reads_total"] != 7.5 || got["lag"] != 7 || len(got) != 2 {
		t.Errorf("Sum = %v, want reads_total 7.5 and lag 7 only", got)
	}
	if _, err := Sum([]byte("not a page {")); err == nil {
		t.Error("Sum of garbage: nil error")
	}
}
