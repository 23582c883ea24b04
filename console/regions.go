package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// regionsPage: the app's regions with their countries, and the countries
// of no region (GET /admin/v1/regions).
func (c *Console) regionsPage(k *call) error {
	k.v.Title, k.v.Section = "Regions and countries", "regions"
	var d map[string]any
	err := k.get("/admin/v1/regions", nil, &d)
	k.v.Data = d
	return err
}

func (c *Console) createRegion(k *call) (string, error) {
	code := formText(k.r, "region_code")
	body := map[string]any{"region_code": code, "name": formText(k.r, "name")}
	if err := k.send(http.MethodPost, "/admin/v1/regions", body, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Region %s created.", code), nil
}

// confirmRegion asks before a region is disabled: its users fall back to
// GLOBAL at the next rebuild.
func confirmRegion(k *call) string {
	if formText(k.r, "status") != "disabled" {
		return ""
	}
	return fmt.Sprintf("Disable region %s? Its users fall back to GLOBAL at the next region rebuild.", formText(k.r, "region_code"))
}

func (c *Console) updateRegion(k *call) (string, error) {
	id, err := pathInt(k.r, "id")
	if err != nil {
		return "", err
	}
	status := formText(k.r, "status")
	if err := k.send(http.MethodPatch, "/admin/v1/regions/"+strconv.FormatInt(id, 10), map[string]any{"status": status}, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Region %s is %s.", formText(k.r, "region_code"), status), nil
}

func (c *Console) createCountry(k *call) (string, error) {
	region, err := formInt(k.r, "region_id", 0)
	if err != nil {
		return "", err
	}
	code := formText(k.r, "country_code")
	body := map[string]any{"country_code": code, "name": formText(k.r, "name"), "region_id": region}
	if err := k.send(http.MethodPost, "/admin/v1/countries", body, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Country %s created.", code), nil
}

// confirmCountry asks before a country is disabled.
func confirmCountry(k *call) string {
	if formText(k.r, "enabled") != "false" {
		return ""
	}
	return fmt.Sprintf("Disable country %s?", k.r.PathValue("code"))
}

// updateCountry enables, disables or moves a country: the form gives
// enabled or region_id.
func (c *Console) updateCountry(k *call) (string, error) {
	code := k.r.PathValue("code")
	body := map[string]any{}
	if e := formText(k.r, "enabled"); e != "" {
		body["enabled"] = e == "true"
	}
	if k.r.PostForm.Has("region_id") {
		region, err := formInt(k.r, "region_id", 0)
		if err != nil {
			return "", err
		}
		body["region_id"] = region
	}
	if err := k.send(http.MethodPatch, "/admin/v1/countries/"+url.PathEscape(code), body, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Country %s updated.", code), nil
}

func confirmRebuild(*call) string {
	return "Recompute every user's region from the current mapping? Users an operator placed keep their region while it is active."
}

func (c *Console) rebuild(k *call) (string, error) {
	var res struct {
		Scanned int64 `json:"scanned"`
		Changed int64 `json:"changed"`
	}
	if err := k.send(http.MethodPost, "/admin/v1/users/region-rebuild", nil, &res); err != nil {
		return "", err
	}
	return fmt.Sprintf("Region rebuild done: %d users read, %d got another region.", res.Scanned, res.Changed), nil
}

// usersPage: a user's region, where it came from and its history (GET
// /admin/v1/users/{id}/region), with the override and release forms.
func (c *Console) usersPage(k *call) error {
	k.v.Title, k.v.Section = "A user's region", "users"
	d := map[string]any{"UserID": k.r.URL.Query().Get("user_id")}
	k.v.Data = d
	var regions map[string]any
	if err := k.get("/admin/v1/regions", nil, &regions); err != nil {
		return err
	}
	d["Regions"] = regions["regions"]
	id := d["UserID"].(string)
	if id == "" {
		return nil
	}
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		return invalid("user_id", "must be a whole number")
	}
	var info map[string]any
	err := k.get("/admin/v1/users/"+url.PathEscape(id)+"/region", nil, &info)
	d["Info"] = info
	return err
}

func (c *Console) setUserRegion(k *call) (string, error) {
	id, err := pathInt(k.r, "id")
	if err != nil {
		return "", err
	}
	region, err := formInt(k.r, "region_id", 0)
	if err != nil {
		return "", err
	}
	body := map[string]any{"region_id": region, "reason": formText(k.r, "reason")}
	if err := k.send(http.MethodPut, fmt.Sprintf("/admin/v1/users/%d/region", id), body, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("User %d placed in region %d until released.", id, region), nil
}

func (c *Console) releaseUserRegion(k *call) (string, error) {
	id, err := pathInt(k.r, "id")
	if err != nil {
		return "", err
	}
	body := map[string]any{"reason": formText(k.r, "reason")}
	if err := k.send(http.MethodDelete, fmt.Sprintf("/admin/v1/users/%d/region", id), body, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("User %d released: back to their country's region.", id), nil
}
